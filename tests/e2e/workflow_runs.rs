//! The workflow run engine on SQLite and PostgreSQL (user data and Canopy's store on the same
//! kind of server): every step kind, as the run's user through the permission layer; the three
//! modes; revise, abort and resume; permissions refusing a step; an approval pausing a run and
//! its decision resuming it; transient errors retried; a bad record id failing the run; a
//! sub-workflow; expired leases taken up again (or, during a write, waiting for a person).

use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use canopy::workflows::engine::{StepStatus, WaitingReason};
use canopy::workflows::runs::{RunState, TriggerKind};
use canopy_e2e::Backend;
use serde_json::{Value as Json, json};

use crate::admin::on_store_backends;
use crate::workflow_fixture::{APPROVALS, Fixture, RUNS, fixture, fixture_with};

fn orders(name: &str, steps: Json) -> Json {
    let mut definition = json!({"name": name, "collection": "orders"});
    definition["steps"] = steps;
    definition
}

async fn complete(
    fx: &Fixture,
    run: &str,
    index: i64,
    user: &crate::workflow_fixture::User,
    body: Json,
) -> (StatusCode, Json) {
    fx.call(
        "POST",
        &format!("{RUNS}/{run}/steps/{index}/complete"),
        user,
        Some(&body),
    )
    .await
}

fn keys(steps: &[canopy::workflows::engine::StepRow]) -> Vec<String> {
    steps.iter().map(|s| s.key.clone()).collect()
}

on_store_backends!(
    every_step_kind_runs_as_the_runs_user,
    modes_wait_for_a_person_then_go_on,
    a_declined_confirmation_skips_the_step,
    revise_cancels_the_later_steps_and_runs_the_step_again,
    abort_and_resume_by_another_user,
    permissions_refuse_steps,
    an_approval_pauses_the_run_and_its_decision_resumes_it,
    transient_errors_are_retried_then_handed_to_a_person,
    a_bad_record_id_fails_the_run_at_its_first_data_step,
    a_sub_workflow_runs_and_its_parent_resumes,
    expired_leases_are_taken_up_again_and_a_write_in_flight_waits,
    a_webhook_run_is_logged_with_the_webhook_origin,
    reads_before_a_wait_are_written_with_it,
    a_go_to_loop_ends_after_the_most_steps_with_every_step_written,
);

async fn every_step_kind_runs_as_the_runs_user(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "kinds",
            json!([
                {"key": "read", "type": "get-data", "fields": ["status", "customer:name"]},
                {"key": "check", "type": "decision", "options": [
                    {"name": "paid", "next": "buyer",
                     "when": {"aggregator": "and", "conditions": [
                        {"field": "status", "operator": "equal", "value": "paid"},
                        {"field": "context.read.customer:name", "operator": "equal", "value": "Ann"},
                     ]}},
                    {"name": "other", "next": "finish"},
                ]},
                {"key": "buyer", "type": "load-related", "relation": "customer", "fields": ["name", "email"]},
                {"key": "mark", "type": "update-data", "mode": "automatic",
                 "values": {"note": "checked {{context.read.status}} for {{context.buyer.name}}"}},
                {"key": "score", "type": "plugin", "plugin": "test-plugin", "handler": "score",
                 "settings": {"threshold": 5}},
                {"key": "jump", "type": "go-to", "target": "done"},
                {"key": "never", "type": "guidance", "prompt": "never reached"},
                {"key": "done", "type": "guidance", "mode": "automatic", "prompt": "Done."},
                {"key": "finish", "type": "end"},
            ]),
        ))
        .await;
    let id = fx.queue(&workflow, "1", &fx.manager).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    let steps = fx.steps(&id).await;
    assert_eq!(
        keys(&steps),
        [
            "read", "check", "buyer", "mark", "score", "jump", "done", "finish"
        ]
    );
    assert!(steps.iter().all(|s| s.status == StepStatus::Succeeded));
    assert_eq!(run.context["read"]["status"], "paid");
    assert_eq!(run.context["read"]["customer:name"], "Ann");
    assert_eq!(run.context["check"], json!({"option": "paid"}));
    assert_eq!(steps[1].selected_option.as_deref(), Some("paid"));
    assert_eq!(
        run.context["buyer"],
        json!({"collection": "customers", "id": "1", "name": "Ann", "email": "ann@x.io"})
    );
    assert_eq!(
        fx.order(1, "note").await.as_deref(),
        Some("checked paid for Ann")
    );
    // The write ran under its marker, done once.
    assert_eq!(steps[3].phase.as_deref(), Some("done"));
    // The plugin step ran as the run's user, on its record, with its settings.
    assert_eq!(run.context["score"]["score"], 42);
    assert_eq!(run.context["score"]["by"], "manager@acme.io");
    assert_eq!(run.context["score"]["record"], "1");
    assert_eq!(run.context["score"]["settings"], json!({"threshold": 5}));
    // Every step is attributed to the run's user, origin executor, without record values.
    let entries = fx.activity().await;
    let actions: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        actions,
        [
            "read",
            "selectWorkflowOption",
            "read",
            "update",
            "completeWorkflowStep",
            "completeWorkflowStep",
            "completeWorkflow"
        ]
    );
    for (_, origin, email, status, label) in &entries {
        assert_eq!(origin, "executor");
        assert_eq!(email, "manager@acme.io");
        assert_eq!(status, "completed");
        assert!(!label.contains("Ann") && !label.contains("paid"), "{label}");
    }
    // The run's last entry says how it ended, without its id: labels are interned, and one
    // per run grew the lookup table and the writer's cache with every run (issue 25).
    let completed = &entries.last().unwrap().4;
    assert_eq!(completed, "workflow kinds: run succeeded");
    assert!(!completed.contains(id.as_str()), "{completed}");

    // The other branch: order 3 is paid but not Ann's.
    let id = fx.queue(&workflow, "3", &fx.manager).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(keys(&fx.steps(&id).await), ["read", "check", "finish"]);
    assert_eq!(run.context["check"]["option"], "other");
}

/// The steps that only read run in memory and are written together (`execute::Unwritten`):
/// when the run comes to a step that waits, they are all there, with the context.
async fn reads_before_a_wait_are_written_with_it(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "reads then a question",
            json!([
                {"key": "read", "type": "get-data", "fields": ["status"]},
                {"key": "check", "type": "decision", "options": [
                    {"name": "paid", "next": "buyer",
                     "when": {"field": "status", "operator": "equal", "value": "paid"}},
                    {"name": "other", "next": "ask"}]},
                {"key": "buyer", "type": "load-related", "relation": "customer", "fields": ["name"]},
                {"key": "ask", "type": "guidance", "prompt": "Call them?", "answer": true},
            ]),
        ))
        .await;
    let id = fx.queue(&workflow, "1", &fx.manager).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::AwaitingInput, "{run:?}");
    assert_eq!(run.current_step_index, Some(3));
    let steps = fx.steps(&id).await;
    assert_eq!(keys(&steps), ["read", "check", "buyer", "ask"]);
    let statuses: Vec<StepStatus> = steps.iter().map(|s| s.status).collect();
    assert_eq!(
        statuses,
        [
            StepStatus::Succeeded,
            StepStatus::Succeeded,
            StepStatus::Succeeded,
            StepStatus::AwaitingInput
        ]
    );
    assert_eq!(steps[0].output, json!({"status": "paid"}));
    assert_eq!(steps[1].selected_option.as_deref(), Some("paid"));
    assert!(steps[..3].iter().all(|s| s.finished_at.is_some()));
    assert_eq!(run.context["read"], json!({"status": "paid"}));
    assert_eq!(run.context["buyer"]["name"], "Ann");
    let (status, body) = complete(&fx, &id, 3, &fx.manager, json!({"answer": "done"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!(run.context["ask"], json!({"answer": "done"}));
}

/// A loop of reads is written in batches as it goes, and stops at the most steps a run may
/// make, with each of them recorded.
async fn a_go_to_loop_ends_after_the_most_steps_with_every_step_written(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "loop",
            json!([
                {"key": "read", "type": "get-data", "fields": ["status"]},
                {"key": "again", "type": "go-to", "target": "read"},
            ]),
        ))
        .await;
    let id = fx.queue(&workflow, "1", &fx.manager).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Failed, "{run:?}");
    assert_eq!(run.error_code.as_deref(), Some("invalid_definition"));
    let message = run.error_message.unwrap_or_default();
    assert!(message.contains("go-to loop"), "{message}");
    let steps = fx.steps(&id).await;
    let max = usize::try_from(canopy::workflows::engine::MAX_STEPS).unwrap();
    assert_eq!(steps.len(), max);
    assert!(steps.iter().all(|s| s.status == StepStatus::Succeeded));
    for (n, step) in steps.iter().enumerate() {
        assert_eq!(step.index, i64::try_from(n).unwrap());
        assert_eq!(step.key, if n % 2 == 0 { "read" } else { "again" });
    }
}

async fn modes_wait_for_a_person_then_go_on(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "modes",
            json!([
                {"key": "ask", "type": "guidance", "prompt": "Why?", "answer": true},
                {"key": "fix", "type": "update-data", "values": {"note": "{{answer.ask}}"}},
                {"key": "route", "type": "decision", "mode": "manual", "options": [
                    {"name": "left", "next": "end"}, {"name": "right", "next": "end"}]},
                {"key": "end", "type": "end"},
            ]),
        ))
        .await;
    let id = fx.queue(&workflow, "2", &fx.manager).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::AwaitingInput);
    assert_eq!(run.waiting_reason, Some(WaitingReason::UserInput));
    assert_eq!(run.current_step_index, Some(0));
    // An answer is required, and only the waiting step can be completed.
    let (status, body) = complete(&fx, &id, 0, &fx.manager, json!({})).await;
    crate::admin::error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
    let (status, body) = complete(&fx, &id, 1, &fx.manager, json!({"answer": "x"})).await;
    crate::admin::error(status, &body, StatusCode::CONFLICT, "conflict");
    let (status, body) = complete(&fx, &id, 0, &fx.manager, json!({"answer": "late parcel"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // `update-data` defaults to confirm: prepared, then it waits.
    let run = fx.settled(&id).await;
    assert_eq!(
        run.waiting_reason,
        Some(WaitingReason::Confirmation),
        "{run:?}"
    );
    assert_eq!(run.context["ask"], json!({"answer": "late parcel"}));
    let steps = fx.steps(&id).await;
    assert_eq!(steps[1].output, json!({"values": {"note": "late parcel"}}));
    assert_eq!(fx.order(2, "note").await.as_deref(), Some("50% off"));
    let (status, body) = complete(&fx, &id, 1, &fx.manager, json!({})).await;
    crate::admin::error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
    let (status, body) = complete(&fx, &id, 1, &fx.manager, json!({"confirmation": true})).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let run = fx.settled(&id).await;
    assert_eq!(fx.order(2, "note").await.as_deref(), Some("late parcel"));
    assert_eq!(run.waiting_reason, Some(WaitingReason::UserInput));
    assert_eq!(run.current_step_index, Some(2));
    let (status, body) = complete(&fx, &id, 2, &fx.manager, json!({"option": "up"})).await;
    let message = crate::admin::error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
    assert!(message.contains("\"left\""), "{message}");
    let (status, body) = complete(&fx, &id, 2, &fx.manager, json!({"option": "right"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(run.context["route"], json!({"option": "right"}));
    // The people's answers are logged as theirs, from the API.
    let entries = fx.activity().await;
    let api: Vec<(&str, &str)> = entries
        .iter()
        .filter(|e| e.1 == "api")
        .map(|e| (e.0.as_str(), e.2.as_str()))
        .collect();
    assert_eq!(
        api,
        [
            ("completeWorkflowStep", "manager@acme.io"),
            ("completeWorkflowStep", "manager@acme.io"),
            ("selectWorkflowOption", "manager@acme.io"),
        ]
    );
}

async fn a_declined_confirmation_skips_the_step(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "declined",
            json!([{"key": "fix", "type": "update-data", "values": {"note": "changed"}}]),
        ))
        .await;
    let id = fx.queue(&workflow, "2", &fx.admin).await;
    assert_eq!(
        fx.settled(&id).await.waiting_reason,
        Some(WaitingReason::Confirmation)
    );
    let (status, body) = complete(&fx, &id, 0, &fx.admin, json!({"confirmation": false})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(fx.steps(&id).await[0].status, StepStatus::Skipped);
    assert_eq!(fx.order(2, "note").await.as_deref(), Some("50% off"));
}

async fn revise_cancels_the_later_steps_and_runs_the_step_again(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "revise",
            json!([
                {"key": "read", "type": "get-data", "fields": ["status"]},
                {"key": "ask", "type": "guidance", "prompt": "Look"},
                {"key": "end", "type": "end"},
            ]),
        ))
        .await;
    let id = fx.queue(&workflow, "2", &fx.manager).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.current_step_index, Some(1));
    assert_eq!(run.context["read"]["status"], "new");
    fx.data
        .execute("UPDATE orders SET status = 'paid' WHERE id = 2")
        .await;
    let (status, body) = fx
        .call(
            "POST",
            &format!("{RUNS}/{id}/steps/0/revise"),
            &fx.manager,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run = fx.settled(&id).await;
    assert_eq!(run.waiting_reason, Some(WaitingReason::UserInput));
    assert_eq!(run.context["read"]["status"], "paid");
    assert!(run.context.get("ask").is_none());
    let steps = fx.steps(&id).await;
    assert_eq!(keys(&steps), ["read", "ask", "read", "ask"]);
    assert!(steps[0].revised);
    assert_eq!(steps[1].status, StepStatus::Cancelled);
    assert_eq!(steps[2].original_step_index, Some(0));
    assert_eq!(steps[2].status, StepStatus::Succeeded);
    assert_eq!(steps[3].status, StepStatus::AwaitingInput);
    assert_eq!(run.current_step_index, Some(3));
    // A revised or cancelled step is not revised again.
    for index in [0, 1] {
        let (status, body) = fx
            .call(
                "POST",
                &format!("{RUNS}/{id}/steps/{index}/revise"),
                &fx.manager,
                None,
            )
            .await;
        crate::admin::error(status, &body, StatusCode::CONFLICT, "conflict");
    }
    let entries = fx.activity().await;
    assert!(
        entries
            .iter()
            .any(|e| e.0 == "reviseWorkflowStep" && e.2 == "manager@acme.io")
    );
}

async fn abort_and_resume_by_another_user(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "escalate",
            json!([
                {"key": "hand", "type": "escalation", "team": "Ops", "message": "please check"},
                {"key": "read", "type": "get-data", "fields": ["status"]},
            ]),
        ))
        .await;
    // Started by the clerk, escalated to Ops: the viewer (in Ops) may resume it.
    let id = fx.queue(&workflow, "2", &fx.clerk).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.waiting_reason, Some(WaitingReason::Escalation));
    assert_eq!(run.assignee_team.as_deref(), Some("Ops"));
    let (status, body) = fx
        .call("POST", &format!("{RUNS}/{id}/resume"), &fx.viewer, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["userId"], fx.viewer.id);
    assert_eq!(body["startedByUserId"], fx.clerk.id);
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!(run.user_id, fx.viewer.id);
    // After the take-over, the steps act as the viewer.
    let entries = fx.activity().await;
    let read = entries.iter().find(|e| e.0 == "read").unwrap();
    assert_eq!(read.2, "viewer@acme.io");
    assert!(
        entries
            .iter()
            .any(|e| e.0 == "resumeWorkflow" && e.2 == "viewer@acme.io" && e.1 == "api")
    );

    // Abort: the run's user may; someone else not (they see it, it is on orders: 403).
    let id = fx.queue(&workflow, "5", &fx.manager).await;
    fx.settled(&id).await;
    let (status, body) = fx
        .call("POST", &format!("{RUNS}/{id}/abort"), &fx.clerk, None)
        .await;
    crate::admin::error(status, &body, StatusCode::FORBIDDEN, "forbidden");
    let (status, body) = fx
        .call("POST", &format!("{RUNS}/{id}/abort"), &fx.manager, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "cancelled");
    assert_eq!(body["steps"][0]["status"], "cancelled");
    let (status, body) = fx
        .call("POST", &format!("{RUNS}/{id}/abort"), &fx.manager, None)
        .await;
    crate::admin::error(status, &body, StatusCode::CONFLICT, "conflict");
    // Ended: a new run on the record may start.
    fx.queue(&workflow, "5", &fx.manager).await;
}

async fn permissions_refuse_steps(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "write",
            json!([{"key": "set", "type": "update-data", "mode": "automatic",
                    "values": {"note": "written"}}]),
        ))
        .await;
    // Outside the clerk's scope (status = new): not found, the run fails, nothing written.
    let id = fx.queue(&workflow, "1", &fx.clerk).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(run.error_code.as_deref(), Some("record_not_found"));
    assert!(
        run.error_message.as_deref().unwrap().contains("scope"),
        "{run:?}"
    );
    assert_eq!(fx.order(1, "note").await.as_deref(), Some("first order"));

    // Without the edit right: refused, the run waits for a person; an admin takes it over and
    // the step runs again as them.
    let id = fx.queue(&workflow, "2", &fx.viewer).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::AwaitingInput);
    assert_eq!(run.waiting_reason, Some(WaitingReason::StepFailed));
    assert_eq!(fx.steps(&id).await[0].status, StepStatus::Failed);
    assert_eq!(fx.order(2, "note").await.as_deref(), Some("50% off"));
    let (status, body) = fx
        .call("POST", &format!("{RUNS}/{id}/resume"), &fx.admin, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!(fx.order(2, "note").await.as_deref(), Some("written"));
    let entries = fx.activity().await;
    let updates: Vec<(&str, &str)> = entries
        .iter()
        .filter(|e| e.0 == "update")
        .map(|e| (e.2.as_str(), e.3.as_str()))
        .collect();
    assert_eq!(
        updates,
        [
            ("clerk@acme.io", "failed"),
            ("viewer@acme.io", "failed"),
            ("admin@acme.io", "completed")
        ]
    );
}

async fn an_approval_pauses_the_run_and_its_decision_resumes_it(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "refund",
            json!([
                {"key": "refund", "type": "trigger-action", "action": "Refund", "mode": "automatic",
                 "values": {"reason": "damaged"}},
                {"key": "end", "type": "end"},
            ]),
        ))
        .await;
    // The manager may refund without approval: it runs as them.
    let id = fx.queue(&workflow, "3", &fx.manager).await;
    assert_eq!(fx.settled(&id).await.state, RunState::Succeeded);
    assert_eq!(*fx.refunds.lock().unwrap(), ["manager@acme.io 3 damaged"]);

    // The clerk needs an approval: a request is filed in their name and the run waits.
    let id = fx.queue(&workflow, "2", &fx.clerk).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.waiting_reason, Some(WaitingReason::Approval), "{run:?}");
    let step = &fx.steps(&id).await[0];
    let approval = step.approval_id.unwrap();
    assert_eq!(step.phase.as_deref(), Some("done"));
    assert_eq!(fx.refunds.lock().unwrap().len(), 1);
    let (status, body) = fx
        .call("GET", &format!("{APPROVALS}/{approval}"), &fx.manager, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["requesterId"], fx.clerk.id);
    assert_eq!(body["attributes"]["values"], json!({"reason": "damaged"}));
    // A person cannot complete it in the approver's place.
    let (status, body) = complete(&fx, &id, 0, &fx.clerk, json!({"confirmation": true})).await;
    crate::admin::error(status, &body, StatusCode::CONFLICT, "conflict");
    // Approved: the action runs as the approver, and the run goes on.
    let (status, body) = fx
        .call(
            "POST",
            &format!("{APPROVALS}/{approval}/approve"),
            &fx.manager,
            Some(&json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!(run.context["refund"]["approved"], true);
    assert_eq!(run.context["refund"]["outcome"]["status"], 200);
    assert_eq!(fx.refunds.lock().unwrap()[1], "manager@acme.io 2 damaged");

    // Rejected: the step fails and the run waits for a person.
    let id = fx.queue(&workflow, "5", &fx.clerk).await;
    fx.settled(&id).await;
    let approval = fx.steps(&id).await[0].approval_id.unwrap();
    let (status, body) = fx
        .call(
            "POST",
            &format!("{APPROVALS}/{approval}/reject"),
            &fx.manager,
            Some(&json!({"comment": "no"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run = fx.store.workflow_run(&id).await.unwrap().unwrap();
    assert_eq!(run.waiting_reason, Some(WaitingReason::StepFailed));
    let step = &fx.steps(&id).await[0];
    assert_eq!(step.status, StepStatus::Failed);
    assert!(step.error_message.as_deref().unwrap().contains("rejected"));
    assert_eq!(fx.refunds.lock().unwrap().len(), 2);
    let entries = fx.activity().await;
    assert_eq!(
        entries
            .iter()
            .filter(|e| e.0 == "createApproval" && e.2 == "clerk@acme.io" && e.1 == "executor")
            .count(),
        2
    );
}

async fn transient_errors_are_retried_then_handed_to_a_person(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "flaky",
            json!([{"key": "score", "type": "plugin", "plugin": "test-plugin", "handler": "score"}]),
        ))
        .await;
    // Two failures, then it works: the third attempt succeeds.
    fx.score_failures.store(2, Ordering::SeqCst);
    let id = fx.queue(&workflow, "1", &fx.manager).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!(fx.steps(&id).await[0].attempt, 2);
    assert_eq!(fx.score_calls.load(Ordering::SeqCst), 3);

    // Failing every time: three attempts, then a person is asked.
    fx.score_failures.store(100, Ordering::SeqCst);
    let id = fx.queue(&workflow, "2", &fx.manager).await;
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::AwaitingInput, "{run:?}");
    assert_eq!(run.waiting_reason, Some(WaitingReason::StepFailed));
    assert!(
        run.error_message
            .as_deref()
            .unwrap()
            .contains("after 3 attempts"),
        "{run:?}"
    );
    assert_eq!(fx.score_calls.load(Ordering::SeqCst), 6);
    // A person does it by hand: the values they give are its output.
    let (status, body) = complete(&fx, &id, 0, &fx.manager, json!({"values": {"score": 7}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run = fx.settled(&id).await;
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(run.context["score"]["score"], 7);
    assert_eq!(run.context["score"]["doneBy"], fx.manager.id);
}

async fn a_bad_record_id_fails_the_run_at_its_first_data_step(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "bad-id",
            json!([
                {"key": "hello", "type": "guidance", "mode": "automatic", "prompt": "Hi"},
                {"key": "read", "type": "get-data", "fields": ["status"]},
            ]),
        ))
        .await;
    for record in ["abc", "999"] {
        let id = fx.queue(&workflow, record, &fx.admin).await;
        let run = fx.settled(&id).await;
        assert_eq!(run.state, RunState::Failed, "{run:?}");
        assert_eq!(run.error_code.as_deref(), Some("record_not_found"));
        assert!(run.error_message.as_deref().unwrap().contains(record));
        let steps = fx.steps(&id).await;
        assert_eq!(steps[0].status, StepStatus::Succeeded);
        assert_eq!(steps[1].status, StepStatus::Failed);
    }
}

async fn a_sub_workflow_runs_and_its_parent_resumes(backend: Backend) {
    let fx = fixture(backend).await;
    fx.workflow(orders(
        "child",
        json!([{"key": "set", "type": "update-data", "mode": "automatic",
                "values": {"note": "from the child"}}]),
    ))
    .await;
    let parent = fx
        .workflow(orders(
            "parent",
            json!([
                {"key": "sub", "type": "sub-workflow", "workflow": "child"},
                {"key": "read", "type": "get-data", "fields": ["note"]},
            ]),
        ))
        .await;
    let id = fx.queue(&parent, "2", &fx.manager).await;
    let run = loop {
        let run = fx.settled(&id).await;
        if run.state != RunState::AwaitingInput {
            break run;
        }
        assert_eq!(run.waiting_reason, Some(WaitingReason::SubWorkflow));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!(run.context["read"]["note"], "from the child");
    let child = run.context["sub"]["runId"].as_str().unwrap();
    let child = fx.store.workflow_run(child).await.unwrap().unwrap();
    assert_eq!(child.parent_run_id.as_deref(), Some(id.as_str()));
    assert_eq!(child.trigger_kind, TriggerKind::SubWorkflow);
    assert_eq!(child.state, RunState::Succeeded);
    assert_eq!(run.context["sub"]["state"], "succeeded");

    // A child that fails: the parent waits for a person.
    let failing = fx
        .workflow(orders(
            "parent-of-failing",
            json!([{"key": "sub", "type": "sub-workflow", "workflow": "failing"}]),
        ))
        .await;
    fx.workflow(orders(
        "failing",
        json!([{"key": "stop", "type": "end", "outcome": "failed", "message": "no"}]),
    ))
    .await;
    let id = fx.queue(&failing, "5", &fx.manager).await;
    let run = loop {
        let run = fx.settled(&id).await;
        if run.waiting_reason != Some(WaitingReason::SubWorkflow) {
            break run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(
        run.waiting_reason,
        Some(WaitingReason::StepFailed),
        "{run:?}"
    );
    assert!(run.error_message.unwrap().contains("ended failed"));
}

async fn expired_leases_are_taken_up_again_and_a_write_in_flight_waits(backend: Backend) {
    let mut fx = fixture_with(backend, false).await;
    let workflow = fx
        .workflow(orders(
            "lease",
            json!([
                {"key": "set", "type": "update-data", "mode": "automatic", "values": {"note": "set"}},
                {"key": "read", "type": "get-data", "fields": ["note"]},
            ]),
        ))
        .await;
    // A run claimed by a worker that died before its first step: queued again, then done.
    let first = fx.queue(&workflow, "2", &fx.admin).await;
    // A run whose worker died while its write was in flight.
    let second = fx.queue(&workflow, "5", &fx.admin).await;
    let past = chrono::Utc::now().timestamp_millis() - 1000;
    for id in [&first, &second] {
        sqlx::query(
            "UPDATE workflow_runs SET state = 'running', locked_by = 'dead-0', \
             lease_expires_at = $1, started_at = $1 WHERE id = $2",
        )
        .bind(past)
        .bind(id)
        .execute(fx.store.pool())
        .await
        .unwrap();
    }
    sqlx::query(
        "INSERT INTO workflow_run_steps (run_id, step_index, step_key, step_type, mode, status, \
         revised, attempt, phase, started_at) \
         VALUES ($1, 0, 'set', 'update-data', 'automatic', 'running', 0, 0, 'executing', $2)",
    )
    .bind(&second)
    .bind(past)
    .execute(fx.store.pool())
    .await
    .unwrap();
    sqlx::query("UPDATE workflow_runs SET current_step_index = 0 WHERE id = $1")
        .bind(&second)
        .execute(fx.store.pool())
        .await
        .unwrap();
    let reaped = fx.store.reap_workflow_leases().await.unwrap();
    assert_eq!(reaped.requeued, std::slice::from_ref(&first));
    assert_eq!(reaped.uncertain, std::slice::from_ref(&second));
    let run = fx.store.workflow_run(&second).await.unwrap().unwrap();
    assert_eq!(run.state, RunState::AwaitingInput);
    assert_eq!(run.waiting_reason, Some(WaitingReason::Uncertain));

    fx.start(backend);
    let run = fx.settled(&first).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!(fx.order(2, "note").await.as_deref(), Some("set"));
    // The uncertain write is not run again by itself.
    assert_eq!(fx.order(5, "note").await.as_deref(), Some("Rush_delivery"));
    let (status, body) = fx
        .call("POST", &format!("{RUNS}/{second}/resume"), &fx.admin, None)
        .await;
    crate::admin::error(status, &body, StatusCode::CONFLICT, "conflict");
    let (status, body) = complete(&fx, &second, 0, &fx.admin, json!({})).await;
    crate::admin::error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
    // A person says it was done: the run goes on without writing again.
    let (status, body) = complete(&fx, &second, 0, &fx.admin, json!({"confirmation": true})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run = fx.settled(&second).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!(fx.order(5, "note").await.as_deref(), Some("Rush_delivery"));
    let steps = fx.steps(&second).await;
    assert_eq!(steps[0].phase.as_deref(), Some("done"));
    assert_eq!(steps.len(), 2);
    fx.stop().await;
}

async fn a_webhook_run_is_logged_with_the_webhook_origin(backend: Backend) {
    let fx = fixture(backend).await;
    let workflow = fx
        .workflow(orders(
            "hooked",
            json!([{"key": "read", "type": "get-data", "fields": ["status"]}]),
        ))
        .await;
    let id = fx
        .queue_as(&workflow, "orders", "1", fx.admin.id, TriggerKind::Webhook)
        .await;
    assert_eq!(fx.settled(&id).await.state, RunState::Succeeded);
    let entries = fx.activity().await;
    assert!(!entries.is_empty());
    assert!(entries.iter().all(|e| e.1 == "webhook"), "{entries:?}");
}

/// Two engines (as two instances would) on one PostgreSQL store, many runs at once: each run
/// is executed once (one set of step rows, one write per record, counted by a trigger).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_on_one_postgres_store_never_run_a_run_twice() {
    let backend = Backend::Postgres;
    let mut fx = fixture_with(backend, false).await;
    fx.data
        .execute(
            "CREATE TABLE writes (order_id INT NOT NULL);
             CREATE FUNCTION count_write() RETURNS trigger AS $$
             BEGIN INSERT INTO writes VALUES (NEW.id); RETURN NEW; END $$ LANGUAGE plpgsql;
             CREATE TRIGGER counted AFTER UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION count_write();
             INSERT INTO orders (status, note) SELECT 'new', 'seed' FROM generate_series(1, 195);",
        )
        .await;
    let workflow = fx
        .workflow(orders(
            "once",
            json!([
                {"key": "read", "type": "get-data", "fields": ["status"]},
                {"key": "set", "type": "update-data", "mode": "automatic", "values": {"note": "once"}},
                {"key": "end", "type": "end"},
            ]),
        ))
        .await;
    let mut ids = Vec::new();
    for order in 1..=200 {
        ids.push(fx.queue(&workflow, &order.to_string(), &fx.admin).await);
    }
    let mut second = crate::workflow_fixture::settings(backend, fx.state_url());
    second.workers = 3;
    fx.start(backend);
    fx.start_with(second);
    for id in &ids {
        let run = fx.settled(id).await;
        assert_eq!(run.state, RunState::Succeeded, "{run:?}");
        assert_eq!(fx.steps(id).await.len(), 3);
    }
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&fx.data.url).await.unwrap();
    let counts: Vec<(i64, i64)> =
        sqlx::query_as("SELECT order_id, COUNT(*) FROM writes GROUP BY order_id ORDER BY order_id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(counts.len(), 200);
    assert!(counts.iter().all(|(_, n)| *n == 1), "{counts:?}");
    pool.close().await;
    fx.stop().await;
}
