//! Approval requests end to end through HTTP (see `approvals_fixture`): a clerk's action needs
//! an approval, the clerk files it, approvers list it, a manager approves it (the action runs
//! as the manager with the recorded values and selection; a second decision is refused) or
//! rejects it (nothing runs), self-approval follows the role's rights, approval conditions
//! bind the approver, and a select-all request is frozen to at most `maxRecordsForApproval`
//! ids. Every step is kept in the request: who, when, the comment and the outcome.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use canopy::platform::{ApprovalStatus, Scope};
use canopy_e2e::{Backend, on_all_backends};
use serde_json::{Value as Json, json};

use crate::approvals_fixture::{
    APPROVALS, Fixture, REFUND, User, fixture, refund_body, refund_rights, request,
    set_refund_rights,
};
use crate::http::send;

/// The body that files `Refund` on these ids for approval.
fn filing(ids: &[&str], reason: &str) -> Json {
    let mut body = refund_body(ids, reason);
    body["action"] = json!("Refund");
    body
}

/// Files a request as `user`; answers status and body.
async fn file(f: &Fixture, user: &User, body: &Json) -> (StatusCode, Json) {
    let (status, _, body) = send(&f.app, request("POST", APPROVALS, user, body)).await;
    (status, body)
}

/// Decides a request (`approve` or `reject`) as `user`.
async fn decide(
    f: &Fixture,
    user: &User,
    id: i64,
    decision: &str,
    body: &Json,
) -> (StatusCode, Json) {
    let uri = format!("{APPROVALS}/{id}/{decision}");
    let (status, _, body) = send(&f.app, request("POST", &uri, user, body)).await;
    (status, body)
}

/// The ids of the requests `user` lists with this query.
async fn listed(f: &Fixture, user: &User, query: &str) -> Vec<i64> {
    let uri = format!("{APPROVALS}{query}");
    let (status, _, body) = send(&f.app, request("GET", &uri, user, &Json::Null)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_i64().unwrap())
        .collect()
}

/// The whole flow: 403 on the agent route, filing, listing, approving (runs as the approver,
/// with the recorded values), a second approval refused, everything recorded.
async fn filing_listing_and_approving(backend: Backend) {
    let f = fixture(backend, 500).await;
    let (status, _, _) = send(
        &f.app,
        request(
            "POST",
            REFUND,
            &f.clerk,
            &refund_body(&["2", "5"], "damaged"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (status, filed) = file(&f, &f.clerk, &filing(&["2", "5"], "damaged")).await;
    assert_eq!(status, StatusCode::CREATED, "{filed}");
    let id = filed["id"].as_i64().unwrap();
    assert_eq!(filed["status"], "pending");
    assert_eq!(filed["requesterId"], f.clerk.id);
    assert_eq!(filed["requesterEmail"], "clerk@acme.io");
    assert_eq!(filed["collectionName"], "orders");
    assert_eq!(filed["actionName"], "Refund");
    assert_eq!(filed["attributes"]["values"], json!({"reason": "damaged"}));
    assert_eq!(
        filed["roleIdsAllowedToApprove"],
        json!([f.roles.manager, f.roles.boss])
    );
    assert!(f.runs().is_empty(), "filing runs nothing");

    // The requester and the approvers see it; a viewer does not.
    assert_eq!(listed(&f, &f.clerk, "?status=pending").await, [id]);
    assert_eq!(listed(&f, &f.manager, "").await, [id]);
    assert_eq!(listed(&f, &f.boss, "?status=pending").await, [id]);
    assert!(listed(&f, &f.viewer, "").await.is_empty());
    assert!(listed(&f, &f.manager, "?status=approved").await.is_empty());
    let (status, _, body) = send(
        &f.app,
        request("GET", &format!("{APPROVALS}/{id}"), &f.viewer, &Json::Null),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["code"], "not_found");

    // The manager approves: the action runs as the manager, on the recorded ids and values.
    let (status, approved) = decide(&f, &f.manager, id, "approve", &json!({"comment": "ok"})).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(f.runs(), ["manager@acme.io 2,5 damaged"]);
    assert_eq!(approved["status"], "approved");
    assert_eq!(approved["decidedById"], f.manager.id);
    assert_eq!(approved["decidedByEmail"], "manager@acme.io");
    assert_eq!(approved["comment"], "ok");
    assert!(approved["decidedAt"].as_i64().unwrap() >= filed["createdAt"].as_i64().unwrap());
    assert_eq!(
        approved["outcome"],
        json!({"status": 200, "body": {"success": "Refunded 2", "refresh": {"relationships": []}}})
    );

    // Decided once: a second approval (or a rejection) is a conflict and runs nothing.
    let (status, body) = decide(&f, &f.boss, id, "approve", &json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["code"], "conflict");
    let (status, _) = decide(&f, &f.manager, id, "reject", &json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(f.runs().len(), 1);

    // The record, as the store keeps it.
    let stored = f.store.approval(id).await.unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Approved);
    assert_eq!(stored.decided_by_id, Some(f.manager.id));
    assert_eq!(stored.outcome.unwrap()["status"], 200);
    assert_eq!(listed(&f, &f.clerk, "?status=approved").await, [id]);
}

/// Two approvers deciding at once: one wins, the other gets 409, the action runs once.
async fn concurrent_approvals_run_once(backend: Backend) {
    let f = fixture(backend, 500).await;
    let (_, filed) = file(&f, &f.clerk, &filing(&["2"], "race")).await;
    let id = filed["id"].as_i64().unwrap();
    let empty = json!({});
    let ((first, _), (second, _)) = tokio::join!(
        decide(&f, &f.manager, id, "approve", &empty),
        decide(&f, &f.boss, id, "approve", &empty),
    );
    let mut statuses = [first, second];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT]);
    assert_eq!(f.runs().len(), 1, "{:?}", f.runs());
}

/// Filing refuses what needs no approval, bad bodies and unknown actions, in the public API's
/// error shape; the session token is required.
async fn filing_refuses_what_needs_no_approval(backend: Backend) {
    let f = fixture(backend, 500).await;
    let (status, body) = file(&f, &f.manager, &filing(&["2"], "x")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["code"], "approval_not_required");
    let (status, body) = file(&f, &f.viewer, &filing(&["2"], "x")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["code"], "action_trigger_forbidden");
    assert_eq!(
        body["message"],
        "You don't have permission to trigger this action."
    );
    let (status, body) = file(&f, &f.clerk, &refund_body(&["2"], "no action")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["code"], "invalid_request");
    let mut unknown = filing(&["2"], "x");
    unknown["action"] = json!("Teleport");
    let (status, body) = file(&f, &f.clerk, &unknown).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let mut claimed = filing(&["2"], "x");
    claimed["data"]["attributes"]["requester_id"] = json!(f.manager.id);
    let (status, _) = file(&f, &f.clerk, &claimed).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, body) =
        send(&f.app, Request::get(APPROVALS).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], "unauthorized");
    let (status, _, body) = send(
        &f.app,
        request(
            "GET",
            "/v1/project/other/environment/production/approval-requests",
            &f.manager,
            &Json::Null,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _, body) = send(
        &f.app,
        request(
            "GET",
            &format!("{APPROVALS}?status=maybe"),
            &f.manager,
            &Json::Null,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "invalid_parameter");
    assert!(f.store.approvals(None).await.unwrap().is_empty());
}

/// Rejecting records the decision and runs nothing.
async fn rejecting_runs_nothing(backend: Backend) {
    let f = fixture(backend, 500).await;
    let (_, filed) = file(&f, &f.clerk, &filing(&["2"], "refused")).await;
    let id = filed["id"].as_i64().unwrap();
    // Only approvers decide: a viewer does not even see it.
    let (status, _) = decide(&f, &f.viewer, id, "reject", &json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = decide(&f, &f.manager, id, "reject", &json!({"comment": 12})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, rejected) = decide(
        &f,
        &f.manager,
        id,
        "reject",
        &json!({"comment": "not this month"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{rejected}");
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(rejected["comment"], "not this month");
    assert_eq!(rejected["decidedById"], f.manager.id);
    assert_eq!(rejected["outcome"], Json::Null);
    let (status, _) = decide(&f, &f.boss, id, "approve", &json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(f.runs().is_empty());
    assert_eq!(listed(&f, &f.clerk, "?status=rejected").await, [id]);
}

/// Self-approval: a clerk (no self-approve) may not approve their own request, a boss
/// (self-approve) may; a manager approves others' requests only.
async fn self_approval_follows_the_rules(backend: Backend) {
    let f = fixture(backend, 500).await;
    let mut rights = refund_rights(f.roles);
    rights["approvalRequired"] = json!({"roles": [f.roles.clerk, f.roles.boss, f.roles.manager]});
    set_refund_rights(&f.store, &rights).await;
    let (_, filed) = file(&f, &f.clerk, &filing(&["2"], "clerk")).await;
    let clerks = filed["id"].as_i64().unwrap();
    let (status, body) = decide(&f, &f.clerk, clerks, "approve", &json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["code"], "approval_not_allowed");
    assert_eq!(
        body["message"],
        "You don't have permission to approve this action."
    );
    assert_eq!(
        body["data"],
        json!({"roleIdsAllowedToApprove": [f.roles.manager, f.roles.boss]})
    );
    assert_eq!(
        f.store.approval(clerks).await.unwrap().unwrap().status,
        ApprovalStatus::Pending,
        "a refused decision leaves the request pending"
    );

    let (status, filed) = file(&f, &f.manager, &filing(&["4"], "manager")).await;
    assert_eq!(status, StatusCode::CREATED, "{filed}");
    let managers = filed["id"].as_i64().unwrap();
    let (status, _) = decide(&f, &f.manager, managers, "approve", &json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (_, filed) = file(&f, &f.boss, &filing(&["1", "3"], "boss")).await;
    let bosses = filed["id"].as_i64().unwrap();
    let (status, body) = decide(&f, &f.boss, bosses, "approve", &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The boss approves the manager's too.
    let (status, body) = decide(&f, &f.boss, managers, "approve", &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        f.runs(),
        ["boss@acme.io 1,3 boss", "boss@acme.io 4 manager"]
    );
}

/// An approval condition binds the approver: every recorded record must match it, as the
/// approver sees them.
async fn approval_conditions_bind_the_approver(backend: Backend) {
    let f = fixture(backend, 500).await;
    let mut rights = refund_rights(f.roles);
    rights["approvalRequired"] = json!({"roles": [f.roles.clerk, f.roles.boss]});
    rights["userApprovalConditions"] = json!([{"roleId": f.roles.manager,
        "filter": {"field": "amount", "operator": "less_than", "value": 50}}]);
    set_refund_rights(&f.store, &rights).await;
    // Orders 1 (10.50) and 4 (100.00), filed by the boss (no scope).
    let (status, filed) = file(&f, &f.boss, &filing(&["1", "4"], "big")).await;
    assert_eq!(status, StatusCode::CREATED, "{filed}");
    assert_eq!(filed["roleIdsAllowedToApprove"], json!([f.roles.boss]));
    let id = filed["id"].as_i64().unwrap();
    let (status, body) = decide(&f, &f.manager, id, "approve", &json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["code"], "approval_not_allowed");
    let (_, filed) = file(&f, &f.boss, &filing(&["1", "3"], "small")).await;
    assert_eq!(
        filed["roleIdsAllowedToApprove"],
        json!([f.roles.boss, f.roles.manager])
    );
    let small = filed["id"].as_i64().unwrap();
    let (status, body) = decide(&f, &f.manager, small, "approve", &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(f.runs(), ["manager@acme.io 1,3 small"]);
}

/// A select-all request is resolved to the ids it targets when filed (within the requester's
/// scope), at most `maxRecordsForApproval` of them; later records do not join it.
async fn select_all_is_frozen_within_max_records(backend: Backend) {
    let f = fixture(backend, 1).await;
    let all = |excluded: &[&str]| {
        json!({"action": "refund", "data": {"attributes": {"collection_name": "orders",
            "ids": [], "all_records": true, "all_records_ids_excluded": excluded,
            "values": {"reason": "all"}}}})
    };
    // The clerk's scope holds orders 2 and 5: two records, over the limit of one.
    let (status, body) = file(&f, &f.clerk, &all(&[])).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["code"], "too_many_records");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("maxRecordsForApproval"),
        "{body}"
    );
    let (status, filed) = file(&f, &f.clerk, &all(&["2"])).await;
    assert_eq!(status, StatusCode::CREATED, "{filed}");
    assert_eq!(filed["attributes"]["all_records"], false);
    assert_eq!(filed["attributes"]["ids"], json!(["5"]));
    let (status, body) = decide(
        &f,
        &f.manager,
        filed["id"].as_i64().unwrap(),
        "approve",
        &json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(f.runs(), ["manager@acme.io 5 all"]);
}

/// Application tokens (`Bearer cnp_…`) reach the approval routes as their user, as on the other
/// `/v1` routes, when they hold the `all` scope (filing and approving run actions on records,
/// which no narrower scope names); a narrower token is a 403, an unknown one a 401.
async fn application_tokens_with_the_all_scope_file_and_decide(backend: Backend) {
    let f = fixture(backend, 500).await;
    let clerk = f.with_token(&f.clerk, &[Scope::All]).await;
    let manager = f.with_token(&f.manager, &[Scope::All]).await;
    let (status, filed) = file(&f, &clerk, &filing(&["2"], "token")).await;
    assert_eq!(status, StatusCode::CREATED, "{filed}");
    assert_eq!(filed["requesterId"], f.clerk.id);
    assert_eq!(filed["requesterEmail"], "clerk@acme.io");
    let id = filed["id"].as_i64().unwrap();
    assert_eq!(listed(&f, &manager, "?status=pending").await, [id]);
    let (status, approved) = decide(&f, &manager, id, "approve", &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(approved["decidedById"], f.manager.id);
    assert_eq!(f.runs(), ["manager@acme.io 2 token"]);

    // A token without `all` is refused, as are unknown tokens.
    let narrow = f.with_token(&f.manager, &[Scope::NotesRead]).await;
    let (status, _, body) = send(&f.app, request("GET", APPROVALS, &narrow, &Json::Null)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["code"], "forbidden");
    let unknown = User {
        id: f.manager.id,
        token: "cnp_not-a-token".to_owned(),
    };
    let (status, _, body) = send(&f.app, request("GET", APPROVALS, &unknown, &Json::Null)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["message"], "Invalid or missing API token");
}

on_all_backends!(
    application_tokens_with_the_all_scope_file_and_decide,
    filing_listing_and_approving,
    concurrent_approvals_run_once,
    filing_refuses_what_needs_no_approval,
    rejecting_runs_nothing,
    self_approval_follows_the_rules,
    approval_conditions_bind_the_approver,
    select_all_is_frozen_within_max_records,
);
