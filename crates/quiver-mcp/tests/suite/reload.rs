//! A reload tells the client (2026-07-28 era, on its `subscriptions/listen` stream): a swap
//! that changed the skills the caller sees sends `notifications/resources/list_changed`; a
//! swap that changed nothing the caller sees sends nothing.

use std::path::Path;
use std::time::Duration;

use quiver_catalog::Catalog;
use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};

use super::harness::{Scripted, connect, front_over};

fn write_skill(root: &Path, description: &str, body: &str) {
    std::fs::create_dir_all(root.join("notes")).unwrap();
    std::fs::write(
        root.join("notes/SKILL.md"),
        format!("---\nname: notes\ndescription: {description}\n---\n{body}\n"),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_swap_that_changed_the_skills_is_announced_on_the_listen_stream() {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    write_skill(&packages, "Takes notes.", "Body.");
    let front = front_over(
        std::slice::from_ref(&packages),
        dir.path(),
        Default::default(),
    );
    let client = connect(front.clone(), Scripted::era(ProtocolVersion::V_2026_07_28)).await;
    let filter = SubscriptionFilter::builder()
        .resources_list_changed()
        .build();
    let mut subscription = client.peer().listen(filter).await.unwrap();
    assert_eq!(
        subscription.acknowledged().resources_list_changed,
        Some(true)
    );
    let swap = |front: &quiver_mcp::Front| {
        front
            .runtime()
            .swap_catalog(Catalog::load_dirs(&[&packages]));
        front.catalog_swapped();
    };
    // The same skills: nothing is sent.
    swap(&front);
    let quiet = tokio::time::timeout(Duration::from_millis(500), subscription.next()).await;
    assert!(quiet.is_err(), "sent without a change: {quiet:?}");
    // An edited description, then a body edited to the same size: each is announced.
    for (description, body) in [
        ("Takes notes, and now much more.", "Body."),
        ("Takes notes, and now much more.", "Bodx."),
    ] {
        std::thread::sleep(Duration::from_millis(20));
        write_skill(&packages, description, body);
        swap(&front);
        let sent = tokio::time::timeout(Duration::from_secs(10), subscription.next())
            .await
            .expect("a notification")
            .unwrap();
        assert!(
            matches!(
                sent,
                Some(ServerNotification::ResourceListChangedNotification(_))
            ),
            "{body}: {sent:?}"
        );
    }
}
