//! Identity: a missing identity is anonymous, never the owner; identity and roles come from the
//! origin the front establishes, never from message text.

use quiver_package::rules::Role;
use quiver_policy::{Principal, RulesEvaluation, evaluate_rules};

use super::common::{World, rule, strings};

#[test]
fn identity_missing_is_anonymous_never_owner() {
    let cases = [
        (Principal::anonymous(), None),
        // A role without an identity is ignored: still anonymous.
        (
            Principal {
                role: Some(Role::Master),
                ..Principal::anonymous()
            },
            None,
        ),
        // A known user without a role is a `user`.
        (
            Principal {
                user_id: Some("42".into()),
                ..Principal::anonymous()
            },
            Some(Role::User),
        ),
        (Principal::user("o", Role::Master), Some(Role::Master)),
    ];
    for (principal, role) in cases {
        assert_eq!(principal.effective_role(), role, "{principal:?}");
    }

    let claimed_master = Principal {
        role: Some(Role::Master),
        platform_roles: strings(&["owner"]),
        ..Principal::anonymous()
    };
    let world = World::qq_group(claimed_master);
    let list = strings(&["role(user)", "platform(qq,owner)"]);
    assert_eq!(
        evaluate_rules(&list, &world.origin, &world.sender),
        RulesEvaluation {
            holds: false,
            trace: vec![
                rule(
                    "role(user)",
                    false,
                    "the sender is anonymous and has no role"
                ),
                rule("platform(qq,owner)", false, "the sender is anonymous"),
            ],
        }
    );
}
