//! The action rules of §5.4 through the agent's action routes, with users of different roles
//! in a real Canopy store (see `approvals_fixture`): trigger by role and by condition, approval
//! required (with and without a condition) and its 403 with `roleIdsAllowedToApprove` (counted
//! without the user's scope), a development environment, the form hooks needing `trigger`
//! alone, a condition that cannot be evaluated, and `signed_approval_request` (approve and
//! self-approve, bad signatures, a top-level `requester_id`).

use axum::http::StatusCode;
use canopy::http::ApprovalSettings;
use canopy::platform::Actor;
use canopy::platform::documents::EnvironmentPermissions;
use canopy_e2e::{Backend, on_all_backends};
use serde_json::json;

use crate::approvals_fixture::{
    REFUND, envelope_with_data, fixture, refund_body, refund_rights, request, set_refund_rights,
};
use crate::harness::ENV_SECRET;
use crate::http::{envelope, send};

const TRIGGER_FORBIDDEN: &str = "You don't have permission to trigger this action.";
const REQUIRES_APPROVAL: &str = "This action requires to be approved.";
const APPROVAL_NOT_ALLOWED: &str = "You don't have permission to approve this action.";

/// A role runs what its `triggerEnabled` grants; another gets the agent's 403 (no `data`).
async fn trigger_follows_the_role(backend: Backend) {
    let f = fixture(backend, 500).await;
    let (status, _, body) = send(
        &f.app,
        request(
            "POST",
            REFUND,
            &f.manager,
            &refund_body(&["1", "3"], "late"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], "Refunded 2");
    assert_eq!(f.runs(), ["manager@acme.io 1,3 late"]);

    let (status, _, body) = send(
        &f.app,
        request("POST", REFUND, &f.viewer, &refund_body(&["1"], "x")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        envelope("CustomActionTriggerForbiddenError", TRIGGER_FORBIDDEN, 403)
    );
    assert_eq!(f.runs().len(), 1, "a refused run does not run");

    // A right granted to everyone (`true`) has no role to match.
    let mut rights = refund_rights(f.roles);
    rights["triggerEnabled"] = json!(true);
    rights["approvalRequired"] = json!(false);
    set_refund_rights(&f.store, &rights).await;
    let (status, _, body) = send(
        &f.app,
        request("POST", REFUND, &f.viewer, &refund_body(&["4"], "y")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(f.runs()[1], "viewer@acme.io 4 y");
}

/// With a trigger condition for the role, every selected record (within the user's scope)
/// must match it; a condition of a right granted to everyone does not apply (as in the agent).
async fn trigger_condition_must_match_every_selected_record(backend: Backend) {
    let f = fixture(backend, 500).await;
    let mut rights = refund_rights(f.roles);
    rights["triggerConditions"] = json!([{"roleId": f.roles.manager, "filter":
        {"aggregator": "and", "conditions": [
            {"field": "status", "operator": "equal", "value": "paid", "source": "data"}]}}]);
    set_refund_rights(&f.store, &rights).await;
    // Orders 1 and 3 are paid, 2 is new.
    let (status, _, body) = send(
        &f.app,
        request("POST", REFUND, &f.manager, &refund_body(&["1", "3"], "ok")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = send(
        &f.app,
        request("POST", REFUND, &f.manager, &refund_body(&["1", "2"], "no")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        envelope("CustomActionTriggerForbiddenError", TRIGGER_FORBIDDEN, 403)
    );
    // The boss has no condition.
    let (status, _, _) = send(
        &f.app,
        request("POST", REFUND, &f.boss, &refund_body(&["1", "2"], "boss")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // Granted to everyone: the role's condition is ignored.
    rights["triggerEnabled"] = json!(true);
    set_refund_rights(&f.store, &rights).await;
    let (status, _, _) = send(
        &f.app,
        request("POST", REFUND, &f.manager, &refund_body(&["1", "2"], "all")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        f.runs(),
        [
            "manager@acme.io 1,3 ok",
            "boss@acme.io 1,2 boss",
            "manager@acme.io 1,2 all"
        ]
    );

    // The clerk's selection includes the team's scope (status = new): a condition on
    // `status = new` is met by all of it, even when the ids name orders outside the scope.
    let mut rights = refund_rights(f.roles);
    rights["approvalRequired"] = json!(false);
    rights["triggerConditions"] = json!([{"roleId": f.roles.clerk,
        "filter": {"field": "status", "operator": "equal", "value": "new"}}]);
    set_refund_rights(&f.store, &rights).await;
    let (status, _, body) = send(
        &f.app,
        request(
            "POST",
            REFUND,
            &f.clerk,
            &refund_body(&["1", "2", "5"], "scoped"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(f.runs()[3], "clerk@acme.io 2,5 scoped");
}

/// Approval required without a condition: 403 with the roles allowed to approve; with a
/// condition, only when a selected record matches it. An approval condition lists its roles
/// only when every record matches, counted without the user's scope.
async fn approval_required_answers_the_roles_allowed_to_approve(backend: Backend) {
    let f = fixture(backend, 500).await;
    let roles = f.roles;
    let (status, _, body) = send(
        &f.app,
        request("POST", REFUND, &f.clerk, &refund_body(&["2"], "x")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        envelope_with_data(
            "CustomActionRequiresApprovalError",
            REQUIRES_APPROVAL,
            403,
            &json!({"roleIdsAllowedToApprove": [roles.manager, roles.boss]})
        )
    );

    // Required only when a selected record is above 15 (order 2 is 20.00, order 5 is 7.00).
    let mut rights = refund_rights(roles);
    rights["approvalRequiredConditions"] = json!([{"roleId": roles.clerk,
        "filter": {"field": "amount", "operator": "greater_than", "value": 15}}]);
    set_refund_rights(&f.store, &rights).await;
    let (status, _, body) = send(
        &f.app,
        request("POST", REFUND, &f.clerk, &refund_body(&["5"], "small")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = send(
        &f.app,
        request("POST", REFUND, &f.clerk, &refund_body(&["2", "5"], "big")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["errors"][0]["name"],
        "CustomActionRequiresApprovalError"
    );
    assert_eq!(f.runs(), ["clerk@acme.io 5 small"]);

    // Managers approve only when every record is below 50. All the clerk's records (scope:
    // orders 2 and 5) are, but not all the records of a select-all without scope (order 4 is
    // 100.00): the roles are counted without the scope, so managers are not listed.
    let mut rights = refund_rights(roles);
    rights["userApprovalConditions"] = json!([{"roleId": roles.manager,
        "filter": {"field": "amount", "operator": "less_than", "value": 50}}]);
    set_refund_rights(&f.store, &rights).await;
    let all = json!({"data": {"attributes": {"collection_name": "orders", "ids": [],
        "all_records": true, "all_records_ids_excluded": [], "values": {"reason": "all"}}}});
    let (status, _, body) = send(&f.app, request("POST", REFUND, &f.clerk, &all)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["errors"][0]["data"],
        json!({"roleIdsAllowedToApprove": [roles.boss]})
    );
    // Orders 2 and 5 by id: every record is below 50, managers are listed (after the roles
    // without condition).
    let (_, _, body) = send(
        &f.app,
        request("POST", REFUND, &f.clerk, &refund_body(&["2", "5"], "two")),
    )
    .await;
    assert_eq!(
        body["errors"][0]["data"],
        json!({"roleIdsAllowedToApprove": [roles.boss, roles.manager]})
    );
}

/// A development environment (document `true`) allows everything and requires no approval.
async fn development_environment_requires_no_approval(backend: Backend) {
    let f = fixture(backend, 500).await;
    f.store
        .set_environment_document(&Actor::System, &EnvironmentPermissions::AllowAll(true))
        .await
        .unwrap();
    for user in [&f.clerk, &f.viewer] {
        let (status, _, body) = send(
            &f.app,
            request("POST", REFUND, user, &refund_body(&["2"], "dev")),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    assert_eq!(f.runs(), ["clerk@acme.io 2 dev", "viewer@acme.io 2 dev"]);
}

/// The form hooks need `trigger` alone: no trigger condition, no approval. Without it, the
/// agent's bare `ForbiddenError` (empty message, so "Unexpected error").
async fn hooks_need_trigger_only(backend: Backend) {
    let f = fixture(backend, 500).await;
    let mut rights = refund_rights(f.roles);
    rights["triggerConditions"] = json!([{"roleId": f.roles.clerk,
        "filter": {"field": "status", "operator": "equal", "value": "cancelled"}}]);
    set_refund_rights(&f.store, &rights).await;
    let hook_body = |ids: &[&str]| {
        json!({"data": {"attributes": {"collection_name": "orders", "ids": ids,
            "values": {}, "fields": [], "changed_field": "reason", "search_field": "reason"}}})
    };
    for hook in ["load", "change", "search"] {
        let uri = format!("/forest/_actions/orders/0/refund/hooks/{hook}?timezone=UTC");
        // The clerk's condition matches nothing, and the clerk needs an approval: the form
        // still opens.
        let (status, _, body) =
            send(&f.app, request("POST", &uri, &f.clerk, &hook_body(&["2"]))).await;
        assert_eq!(status, StatusCode::OK, "{hook}: {body}");
        assert_eq!(body["fields"][0]["field"], "reason", "{hook}: {body}");
        let (status, _, body) =
            send(&f.app, request("POST", &uri, &f.viewer, &hook_body(&["2"]))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{hook}");
        assert_eq!(body, envelope("ForbiddenError", "Unexpected error", 403));
    }
    // The spec's form-values route is a form route too.
    let (status, _, _) = send(
        &f.app,
        request(
            "POST",
            "/forest/actions/refund/values?timezone=UTC",
            &f.viewer,
            &hook_body(&["2"]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Executing is refused by the condition.
    let (status, _, body) = send(
        &f.app,
        request("POST", REFUND, &f.clerk, &refund_body(&["2"], "x")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["errors"][0]["name"],
        "CustomActionTriggerForbiddenError"
    );
}

/// A condition that cannot be evaluated (a field the collection does not have) is 422
/// `InvalidActionConditionError`, whatever the rule it belongs to.
async fn an_unusable_condition_is_422(backend: Backend) {
    let f = fixture(backend, 500).await;
    let broken = json!({"field": "no_such_field", "operator": "equal", "value": 1});
    let detail = "The conditions to trigger this action cannot be verified. Please contact an administrator.";
    for key in ["triggerConditions", "approvalRequiredConditions"] {
        let mut rights = refund_rights(f.roles);
        rights[key] = json!([{"roleId": f.roles.clerk, "filter": broken}]);
        set_refund_rights(&f.store, &rights).await;
        let (status, _, body) = send(
            &f.app,
            request("POST", REFUND, &f.clerk, &refund_body(&["2"], "x")),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{key}");
        assert_eq!(
            body,
            envelope("InvalidActionConditionError", detail, 422),
            "{key}"
        );
    }
    assert!(f.runs().is_empty());
}

/// A `signed_approval_request` (signed with the env secret) replaces the body and names its
/// requester: approve or self-approve decide. A wrong signature, or a `requester_id` outside a
/// signed request, is refused.
async fn signed_approval_requests(backend: Backend) {
    let f = fixture(backend, 500).await;
    let signer = ApprovalSettings::new(ENV_SECRET, 500);
    let signed = |requester: i64, reason: &str| {
        let mut payload = refund_body(&["2"], reason);
        payload["data"]["attributes"]["requester_id"] = json!(requester);
        signer.sign(&payload).unwrap()
    };
    let outer = |token: &str| {
        let mut body = refund_body(&["5"], "outer values are ignored");
        body["data"]["attributes"]["signed_approval_request"] = json!(token);
        body
    };
    // A manager approves the clerk's request: the payload's ids and values run.
    let (status, _, body) = send(
        &f.app,
        request(
            "POST",
            REFUND,
            &f.manager,
            &outer(&signed(f.clerk.id, "signed")),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(f.runs(), ["manager@acme.io 2 signed"]);

    // The clerk may not approve (not even their own request: no self-approval).
    let (status, _, body) = send(
        &f.app,
        request(
            "POST",
            REFUND,
            &f.clerk,
            &outer(&signed(f.clerk.id, "self")),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        envelope_with_data(
            "ApprovalNotAllowedError",
            APPROVAL_NOT_ALLOWED,
            403,
            &json!({"roleIdsAllowedToApprove": [f.roles.manager, f.roles.boss]})
        )
    );
    // A manager may approve others' requests, not their own.
    let (status, _, body) = send(
        &f.app,
        request(
            "POST",
            REFUND,
            &f.manager,
            &outer(&signed(f.manager.id, "mine")),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["errors"][0]["name"], "ApprovalNotAllowedError");
    // The boss may self-approve.
    let (status, _, body) = send(
        &f.app,
        request("POST", REFUND, &f.boss, &outer(&signed(f.boss.id, "boss"))),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(f.runs()[1], "boss@acme.io 2 boss");

    // Signed with another secret: refused, nothing runs.
    let forged = ApprovalSettings::new(&"e".repeat(64), 500);
    let mut payload = refund_body(&["2"], "forged");
    payload["data"]["attributes"]["requester_id"] = json!(f.clerk.id);
    let (status, _, body) = send(
        &f.app,
        request(
            "POST",
            REFUND,
            &f.manager,
            &outer(&forged.sign(&payload).unwrap()),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        envelope(
            "ForbiddenError",
            "The signed approval request is invalid or expired.",
            403
        )
    );
    // A requester_id outside a signed request: the agent's 422.
    let mut body = refund_body(&["2"], "claimed");
    body["data"]["attributes"]["requester_id"] = json!(f.clerk.id);
    let (status, _, answer) = send(&f.app, request("POST", REFUND, &f.manager, &body)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        answer,
        envelope("UnprocessableError", "Unexpected error", 422)
    );
    assert_eq!(f.runs().len(), 2);
}

on_all_backends!(
    trigger_follows_the_role,
    trigger_condition_must_match_every_selected_record,
    approval_required_answers_the_roles_allowed_to_approve,
    development_environment_requires_no_approval,
    hooks_need_trigger_only,
    an_unusable_condition_is_422,
    signed_approval_requests,
);
