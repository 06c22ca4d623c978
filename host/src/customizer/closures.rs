//! Handlers made of plain Rust closures, so the stack is testable (and usable in-process) without
//! plugins. Each function wraps a closure into the `Arc<dyn …Handler>` a [`Kind`](super::Kind)
//! holds.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use super::handlers::{
    ActionContext, ActionHandler, Batch, ChartHandler, ComputeHandler, Context, HookData,
    HookHandler, HookPosition, OperatorHandler, OverrideHandler, SearchHandler, SegmentHandler,
    WriteContext, WriteHandler,
};
use crate::datasource::action::{ActionResult, FormElement, FormPhase};
use crate::datasource::chart::{ChartRequest, ChartResult};
use crate::datasource::{Caller, ConditionTree, Filter, Record, Result, Value};

struct Compute<F>(F);

#[async_trait]
impl<F> ComputeHandler for Compute<F>
where
    F: Fn(&Batch) -> Result<Vec<Value>> + Send + Sync,
{
    async fn compute(&self, _caller: &Caller, _ctx: &Context, batch: &Batch) -> Result<Vec<Value>> {
        (self.0)(batch)
    }
}

/// A computed field's `getValues` from a closure over the batch.
pub fn compute<F>(f: F) -> Arc<dyn ComputeHandler>
where
    F: Fn(&Batch) -> Result<Vec<Value>> + Send + Sync + 'static,
{
    Arc::new(Compute(f))
}

struct Hook<F>(F);

#[async_trait]
impl<F> HookHandler for Hook<F>
where
    F: Fn(&Caller, HookPosition, &mut HookData) -> Result<()> + Send + Sync,
{
    async fn run(
        &self,
        caller: &Caller,
        _ctx: &Context,
        position: HookPosition,
        data: &mut HookData,
    ) -> Result<()> {
        (self.0)(caller, position, data)
    }
}

/// A hook from a closure that may change the data or fail.
pub fn hook<F>(f: F) -> Arc<dyn HookHandler>
where
    F: Fn(&Caller, HookPosition, &mut HookData) -> Result<()> + Send + Sync + 'static,
{
    Arc::new(Hook(f))
}

struct Segment<F>(F);

#[async_trait]
impl<F> SegmentHandler for Segment<F>
where
    F: Fn(&Caller) -> Result<Option<ConditionTree>> + Send + Sync,
{
    async fn tree(&self, caller: &Caller, _ctx: &Context) -> Result<Option<ConditionTree>> {
        (self.0)(caller)
    }
}

/// A dynamic segment from a closure over the caller.
pub fn segment<F>(f: F) -> Arc<dyn SegmentHandler>
where
    F: Fn(&Caller) -> Result<Option<ConditionTree>> + Send + Sync + 'static,
{
    Arc::new(Segment(f))
}

struct Search<F>(F);

#[async_trait]
impl<F> SearchHandler for Search<F>
where
    F: Fn(&str, bool) -> Result<Option<ConditionTree>> + Send + Sync,
{
    async fn search(
        &self,
        _caller: &Caller,
        _ctx: &Context,
        text: &str,
        extended: bool,
    ) -> Result<Option<ConditionTree>> {
        (self.0)(text, extended)
    }
}

/// A search handler from a closure over the text and the extended flag.
pub fn search<F>(f: F) -> Arc<dyn SearchHandler>
where
    F: Fn(&str, bool) -> Result<Option<ConditionTree>> + Send + Sync + 'static,
{
    Arc::new(Search(f))
}

struct Chart<F>(F);

#[async_trait]
impl<F> ChartHandler for Chart<F>
where
    F: Fn(&Caller, &ChartRequest) -> Result<ChartResult> + Send + Sync,
{
    async fn render(
        &self,
        caller: &Caller,
        _ctx: &Context,
        request: &ChartRequest,
    ) -> Result<ChartResult> {
        (self.0)(caller, request)
    }
}

/// A chart from a closure over the caller and the request.
pub fn chart<F>(f: F) -> Arc<dyn ChartHandler>
where
    F: Fn(&Caller, &ChartRequest) -> Result<ChartResult> + Send + Sync + 'static,
{
    Arc::new(Chart(f))
}

struct Action<F, E> {
    form: F,
    execute: E,
}

#[async_trait]
impl<F, E, Fut> ActionHandler for Action<F, E>
where
    F: Fn(&ActionContext, &FormPhase) -> Result<Vec<FormElement>> + Send + Sync,
    E: Fn(Caller, ActionContext) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ActionResult>> + Send,
{
    async fn form(
        &self,
        _caller: &Caller,
        ctx: &ActionContext,
        phase: &FormPhase,
    ) -> Result<Vec<FormElement>> {
        (self.form)(ctx, phase)
    }

    async fn execute(&self, caller: &Caller, ctx: &ActionContext) -> Result<ActionResult> {
        (self.execute)(caller.clone(), ctx.clone()).await
    }
}

/// An action from a form closure (used only when the form is dynamic) and an async execute
/// closure (`|caller, ctx| async move { … }`), which may call `ctx.get_records`.
pub fn action<F, E, Fut>(form: F, execute: E) -> Arc<dyn ActionHandler>
where
    F: Fn(&ActionContext, &FormPhase) -> Result<Vec<FormElement>> + Send + Sync + 'static,
    E: Fn(Caller, ActionContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ActionResult>> + Send + 'static,
{
    Arc::new(Action { form, execute })
}

struct Write<F>(F);

#[async_trait]
impl<F> WriteHandler for Write<F>
where
    F: Fn(&Value, &WriteContext) -> Result<Option<Record>> + Send + Sync,
{
    async fn write(
        &self,
        _caller: &Caller,
        ctx: &WriteContext,
        value: &Value,
    ) -> Result<Option<Record>> {
        (self.0)(value, ctx)
    }
}

/// A `replaceFieldWriting` handler from a closure over the value and the write context.
pub fn write<F>(f: F) -> Arc<dyn WriteHandler>
where
    F: Fn(&Value, &WriteContext) -> Result<Option<Record>> + Send + Sync + 'static,
{
    Arc::new(Write(f))
}

struct Operator<F>(F);

#[async_trait]
impl<F> OperatorHandler for Operator<F>
where
    F: Fn(&Value) -> Result<ConditionTree> + Send + Sync,
{
    async fn replace(
        &self,
        _caller: &Caller,
        _ctx: &Context,
        value: &Value,
    ) -> Result<ConditionTree> {
        (self.0)(value)
    }
}

/// A `replaceFieldOperator` handler from a closure over the leaf's value.
pub fn operator<F>(f: F) -> Arc<dyn OperatorHandler>
where
    F: Fn(&Value) -> Result<ConditionTree> + Send + Sync + 'static,
{
    Arc::new(Operator(f))
}

/// What an override closure is given, and returns for `create`.
pub enum Overridden {
    Create(Vec<Record>),
    Update(Filter, Record),
    Delete(Filter),
}

struct Override<F>(F);

#[async_trait]
impl<F, Fut> OverrideHandler for Override<F>
where
    F: Fn(Caller, Context, Overridden) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Vec<Record>>> + Send,
{
    async fn create(
        &self,
        caller: &Caller,
        ctx: &Context,
        records: Vec<Record>,
    ) -> Result<Vec<Record>> {
        (self.0)(caller.clone(), ctx.clone(), Overridden::Create(records)).await
    }

    async fn update(
        &self,
        caller: &Caller,
        ctx: &Context,
        filter: &Filter,
        patch: &Record,
    ) -> Result<()> {
        let call = Overridden::Update(filter.clone(), patch.clone());
        (self.0)(caller.clone(), ctx.clone(), call).await.map(drop)
    }

    async fn delete(&self, caller: &Caller, ctx: &Context, filter: &Filter) -> Result<()> {
        let call = Overridden::Delete(filter.clone());
        (self.0)(caller.clone(), ctx.clone(), call).await.map(drop)
    }
}

/// An override from one async closure (`|caller, ctx, call| async move { … }`) that may call
/// back into `ctx.datasource`; for update and delete the returned records are ignored.
pub fn overrides<F, Fut>(f: F) -> Arc<dyn OverrideHandler>
where
    F: Fn(Caller, Context, Overridden) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<Record>>> + Send + 'static,
{
    Arc::new(Override(f))
}

struct WorkflowStep<F>(F);

#[async_trait]
impl<F> super::handlers::WorkflowStepHandler for WorkflowStep<F>
where
    F: Fn(
            &Caller,
            &super::handlers::WorkflowStepInput,
        ) -> Result<super::handlers::WorkflowStepOutput>
        + Send
        + Sync,
{
    async fn run(
        &self,
        caller: &Caller,
        _ctx: &Context,
        input: &super::handlers::WorkflowStepInput,
    ) -> Result<super::handlers::WorkflowStepOutput> {
        (self.0)(caller, input)
    }
}

/// A workflow step handler (a `plugin` step's) from a closure over the run's user and the
/// step's input.
pub fn workflow_step<F>(f: F) -> Arc<dyn super::handlers::WorkflowStepHandler>
where
    F: Fn(
            &Caller,
            &super::handlers::WorkflowStepInput,
        ) -> Result<super::handlers::WorkflowStepOutput>
        + Send
        + Sync
        + 'static,
{
    Arc::new(WorkflowStep(f))
}
