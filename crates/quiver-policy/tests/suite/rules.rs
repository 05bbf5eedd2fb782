//! Permission rules: all of a list must hold, commas mean any of, `*` is a wildcard, `master` ⊃
//! `trusted` ⊃ `user`, an unknown rule denies, an empty list passes.

use quiver_package::rules::Role;
use quiver_policy::{
    Origin, PolicyError, Principal, RulesEvaluation, ScopeKind, evaluate_rules, parse_rules,
};

use super::common::{rule, strings};

fn qq_group() -> Origin {
    Origin::on("qq", ScopeKind::Group, "10001")
}

#[test]
fn rules_empty_list_passes() {
    let cases = [
        (Origin::local(), Principal::anonymous()),
        (qq_group(), Principal::user("42", Role::User)),
    ];
    for (origin, sender) in cases {
        assert_eq!(
            evaluate_rules(&[], &origin, &sender),
            RulesEvaluation {
                holds: true,
                trace: vec![],
            }
        );
    }
    assert_eq!(parse_rules(&[]), Ok(vec![]));
}

#[test]
fn rules_unknown_rule_is_a_syntax_error_and_denies() {
    let list = strings(&["wizard(1)", "role(god)", "group(1"]);
    assert_eq!(
        parse_rules(&list),
        Err(PolicyError::InvalidRule {
            rule: "wizard(1)".into(),
            message: "`wizard` is not a known permission rule".into(),
        })
    );
    // Even the owner in a matching group is denied by a rule that does not parse.
    let owner = Principal::user("owner", Role::Master);
    assert_eq!(
        evaluate_rules(&list, &qq_group(), &owner),
        RulesEvaluation {
            holds: false,
            trace: vec![
                rule(
                    "wizard(1)",
                    false,
                    "syntax error: `wizard` is not a known permission rule; a rule that does not parse denies"
                ),
                rule(
                    "role(god)",
                    false,
                    "syntax error: `role(god)`: the role must be `master`, `trusted` or `user`; a rule that does not parse denies"
                ),
                rule(
                    "group(1",
                    false,
                    "syntax error: `group(1` is missing its closing `)`; a rule that does not parse denies"
                ),
            ],
        }
    );
}

#[test]
fn rules_every_rule_of_a_list_must_hold() {
    let list = strings(&["adapter(qq)", "group(10001)", "role(trusted)"]);
    let trusted = Principal::user("7", Role::Trusted);
    let plain = Principal::user("8", Role::User);
    assert_eq!(
        evaluate_rules(&list, &qq_group(), &trusted),
        RulesEvaluation {
            holds: true,
            trace: vec![
                rule("adapter(qq)", true, "the platform `qq` is listed"),
                rule("group(10001)", true, "group `10001` is listed"),
                rule("role(trusted)", true, "the sender is `trusted`"),
            ],
        }
    );
    assert_eq!(
        evaluate_rules(&list, &qq_group(), &plain),
        RulesEvaluation {
            holds: false,
            trace: vec![
                rule("adapter(qq)", true, "the platform `qq` is listed"),
                rule("group(10001)", true, "group `10001` is listed"),
                rule(
                    "role(trusted)",
                    false,
                    "the sender is `user`, below `trusted`"
                ),
            ],
        }
    );
}

/// One rule, one conversation, one sender: whether it holds and why.
#[test]
fn rules_table() {
    let user = |id: &str| Principal::user(id, Role::User);
    let with_roles = |roles: &[&str]| Principal {
        platform_roles: strings(roles),
        ..Principal::user("42", Role::User)
    };
    let group = qq_group();
    let private = Origin::on("qq", ScopeKind::Private, "42");
    let channel = Origin::on("discord", ScopeKind::Channel, "c9");
    let cli = Origin::local();
    let cases: Vec<(&str, &Origin, Principal, bool, &str)> = vec![
        // Commas inside a rule mean any of.
        (
            "group(1,10001)",
            &group,
            user("1"),
            true,
            "group `10001` is listed",
        ),
        (
            "group(1,2)",
            &group,
            user("1"),
            false,
            "group `10001` is not listed",
        ),
        (
            "adapter(discord,qq)",
            &group,
            user("1"),
            true,
            "the platform `qq` is listed",
        ),
        (
            "user(7,42)",
            &group,
            user("42"),
            true,
            "the sender `42` is listed",
        ),
        // `*` matches any value that is present, never a missing one.
        (
            "group(*)",
            &group,
            user("1"),
            true,
            "group `10001` is listed",
        ),
        (
            "group(*)",
            &private,
            user("1"),
            false,
            "the conversation is a private chat, not a group",
        ),
        (
            "group(*)",
            &cli,
            user("1"),
            false,
            "the conversation is not a group",
        ),
        (
            "adapter(*)",
            &cli,
            user("1"),
            false,
            "the conversation has no platform",
        ),
        (
            "user(*)",
            &group,
            Principal::anonymous(),
            false,
            "the sender is anonymous",
        ),
        (
            "user(*)",
            &group,
            user("9"),
            true,
            "the sender `9` is listed",
        ),
        (
            "private(*)",
            &private,
            user("42"),
            true,
            "private chat `42` is listed",
        ),
        (
            "channel(c9)",
            &channel,
            user("1"),
            true,
            "channel `c9` is listed",
        ),
        (
            "channel(c9)",
            &group,
            user("1"),
            false,
            "the conversation is a group, not a channel",
        ),
        // `master` implies `trusted` implies `user`.
        (
            "role(user)",
            &cli,
            Principal::user("o", Role::Master),
            true,
            "the sender is `master`, which includes `user`",
        ),
        (
            "role(trusted)",
            &cli,
            Principal::user("o", Role::Master),
            true,
            "the sender is `master`, which includes `trusted`",
        ),
        (
            "role(master)",
            &cli,
            Principal::user("t", Role::Trusted),
            false,
            "the sender is `trusted`, below `master`",
        ),
        (
            "role(user)",
            &cli,
            Principal::anonymous(),
            false,
            "the sender is anonymous and has no role",
        ),
        // `platform(adapter,perm)` reads the sender's platform roles on that adapter.
        (
            "platform(qq,admin)",
            &group,
            with_roles(&["admin"]),
            true,
            "the sender is `admin` on `qq`",
        ),
        (
            "platform(qq,admin)",
            &group,
            with_roles(&["owner"]),
            true,
            "the sender is `owner` on `qq`, which includes `admin`",
        ),
        (
            "platform(qq,owner)",
            &group,
            with_roles(&["admin"]),
            false,
            "the sender is [`admin`] on `qq`, not `owner`",
        ),
        (
            "platform(qq,admin)",
            &group,
            with_roles(&[]),
            false,
            "the sender has no role on `qq`",
        ),
        (
            "platform(discord,admin)",
            &group,
            with_roles(&["admin"]),
            false,
            "the conversation is on `qq`, not `discord`",
        ),
        (
            "platform(*,admin)",
            &group,
            with_roles(&["admin"]),
            true,
            "the sender is `admin` on `qq`",
        ),
        (
            "platform(qq,*)",
            &group,
            with_roles(&["member"]),
            true,
            "the sender is `member` on `qq`",
        ),
        (
            "platform(qq,admin)",
            &cli,
            with_roles(&["admin"]),
            false,
            "the conversation has no platform",
        ),
    ];
    for (text, origin, sender, holds, why) in cases {
        let list = vec![text.to_owned()];
        assert_eq!(
            evaluate_rules(&list, origin, &sender),
            RulesEvaluation {
                holds,
                trace: vec![rule(text, holds, why)],
            },
            "{text}"
        );
    }
}
