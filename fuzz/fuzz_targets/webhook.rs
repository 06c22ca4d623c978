//! Signed webhook URLs (`workflows::webhook`): the path segment `{trigger}.{version}.{kid}.{mac}`
//! read and verified as the webhook route does before it touches the store, the key ring of
//! `workflowWebhookKeys`, and the path helpers of the logs and the rate limiter.
//!
//! Input: `<path segment>\n<project>\n<environment>\n<workflowWebhookKeys>`; without a valid
//! key list the ring is the one derived from an auth secret. Beyond "no panic", it checks that a
//! URL the ring signs verifies, for its project and environment only, and that the redacted log
//! path never shows a MAC.

#![no_main]

#[allow(dead_code, reason = "each target uses some of the shared helpers")]
mod common;

use canopy::config::parse_webhook_keys;
use canopy::workflows::webhook::{Hook, KeyRing, PATH, is_hook_path, redact_path};
use common::split;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (lines, keys) = split(data, 3);
    let (segment, project, environment) = (&lines[0], &lines[1], &lines[2]);
    let configured = parse_webhook_keys(&keys).unwrap_or_default();
    let ring = KeyRing::new(&configured, "an auth secret of the fuzz target, 32+ bytes");

    // What the route does with a presented segment, and what the logs and limiter see of it.
    let presented = Hook::parse(segment);
    if let Some(hook) = &presented {
        let _ = ring.verify(project, environment, hook);
    }
    for path in [
        segment.clone(),
        format!("{PATH}/{segment}"),
        format!("/forest/v1{PATH}/{segment}"),
    ] {
        let _ = is_hook_path(&path);
        let _ = redact_path(&path);
    }

    // A URL signed for the presented trigger and version verifies here, and nowhere else.
    let Some(hook) = presented else {
        return;
    };
    let signed = ring.sign(
        project,
        environment,
        &hook.trigger_id,
        hook.url_version,
        Some(&hook.kid),
    );
    let parsed = Hook::parse(&signed)
        .unwrap_or_else(|| panic!("a signed segment does not parse: {signed:?}"));
    assert_eq!(parsed.trigger_id, hook.trigger_id);
    assert_eq!(parsed.url_version, hook.url_version);
    assert!(ring.verify(project, environment, &parsed), "{signed:?}");
    assert!(!ring.verify(&format!("{project}x"), environment, &parsed));
    assert!(!ring.verify(project, &format!("{environment}x"), &parsed));
    let path = format!("/forest/v1{PATH}/{signed}");
    assert!(is_hook_path(&path));
    let mac = signed.rsplit('.').next().unwrap_or_default();
    assert!(
        !redact_path(&path).contains(mac),
        "the log path shows the MAC: {path:?}"
    );
});
