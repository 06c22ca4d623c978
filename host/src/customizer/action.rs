//! Actions (`addAction`, §8.9): declared in the collection's schema (name order = route index),
//! executed and their forms computed by their handlers. A static form is answered from its
//! declaration, with the submitted values filled in, without calling the handler.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use indexmap::IndexMap;

use super::handlers::{ActionContext, ActionHandler, Context};
use super::stack::StackOptions;
use super::stack::{Decorator, Layer, by_collection, decorated};
use super::{Customization, Kind};
use crate::datasource::action::{
    ActionResult, ActionSchema, ActionScope, FormElement, FormField, FormPhase, FormValues,
};
use crate::datasource::{
    Caller, Collection, CollectionSchema, DataSource, Error, Filter, Page, Projection, Result,
};

/// The actions of one collection, by name, with their handlers.
type Declared = IndexMap<String, (ActionSchema, Arc<dyn ActionHandler>)>;

/// The action layer over `child`. An action name used twice on a collection is refused.
pub(super) fn layer(
    child: &Arc<dyn DataSource>,
    customizations: Vec<Customization>,
    _options: &StackOptions,
) -> Result<Arc<dyn DataSource>> {
    let mut declared: HashMap<String, Declared> = HashMap::new();
    for (collection, list) in by_collection(customizations) {
        let existing = &child.schema().collection(&collection)?.actions;
        let actions = declared.entry(collection.clone()).or_default();
        for customization in list {
            let Kind::Action {
                name,
                scope,
                generate_file,
                description,
                submit_button_label,
                static_form,
                handler,
            } = customization.kind
            else {
                continue;
            };
            if existing.contains_key(&name) || actions.contains_key(&name) {
                return Err(Error::validation(format!(
                    "{}: the action '{name}' is defined twice on '{collection}'",
                    customization.origin
                )));
            }
            let schema = ActionSchema {
                scope,
                generate_file,
                description,
                submit_button_label,
                static_form,
            };
            actions.insert(name, (schema, handler));
        }
    }
    let layer = Layer::new(Arc::clone(child), |collection| {
        let Some(actions) = declared.remove(&collection.schema().name) else {
            return Ok(None);
        };
        let mut schema = collection.schema().clone();
        for (name, (action, _)) in &actions {
            schema.actions.insert(name.clone(), action.clone());
        }
        Ok(Some(decorated(Actions {
            child: collection,
            datasource: Arc::clone(child),
            schema,
            actions,
        })))
    })?;
    Ok(Arc::new(layer))
}

struct Actions {
    child: Arc<dyn Collection>,
    datasource: Arc<dyn DataSource>,
    schema: CollectionSchema,
    actions: Declared,
}

impl Actions {
    fn context(
        &self,
        name: &str,
        action: &ActionSchema,
        filter: &Filter,
        values: &FormValues,
        changed_field: Option<&str>,
    ) -> ActionContext {
        ActionContext {
            base: Context {
                collection: Some(self.schema.name.clone()),
                datasource: Arc::clone(&self.datasource),
            },
            action: name.to_owned(),
            scope: action.scope,
            filter: filter.clone(),
            form_values: values.clone(),
            changed_field: changed_field.map(str::to_owned),
        }
    }
}

/// The toolkit's message when a Single action's selection matches no record (`getRecord`).
pub(super) const NO_RECORD: &str = "Query with filter did not match any records";

/// A Single action runs on exactly one record: its selection is counted (two at most are read)
/// before the handler runs, so a selection of none or several is refused rather than executed on
/// whichever record comes first.
async fn check_single(child: &dyn Collection, caller: &Caller, filter: &Filter) -> Result<()> {
    let keys = child.schema().primary_keys();
    let probe = Filter {
        page: Some(Page::new(0, 2)),
        sort: Default::default(),
        ..filter.clone()
    };
    let found = child
        .list(caller, &probe, &Projection::new(keys.iter().copied()))
        .await?
        .len();
    match found {
        1 => Ok(()),
        0 => Err(Error::validation(NO_RECORD)),
        _ => Err(Error::validation(
            "A Single action runs on one record, and the selection holds several",
        )),
    }
}

/// A static form with the submitted values in place of the defaults.
fn fill(elements: &[FormElement], values: &FormValues) -> Vec<FormElement> {
    let field = |f: &FormField| {
        let mut f = f.clone();
        if let Some(value) = values.get(&f.id) {
            f.value = Some(value.clone());
        }
        f
    };
    elements
        .iter()
        .map(|element| match element {
            FormElement::Field(f) => FormElement::Field(field(f)),
            FormElement::Row { fields } => FormElement::Row {
                fields: fields.iter().map(field).collect(),
            },
            FormElement::Page {
                next_button_label,
                previous_button_label,
                elements,
            } => FormElement::Page {
                next_button_label: next_button_label.clone(),
                previous_button_label: previous_button_label.clone(),
                elements: fill(elements, values),
            },
            other => other.clone(),
        })
        .collect()
}

/// The field a search hook asks for (by id, or by label as the agent also accepts).
fn only_field(elements: &[FormElement], wanted: &str) -> Vec<FormElement> {
    elements
        .iter()
        .flat_map(FormElement::fields)
        .find(|f| f.id == wanted || f.label == wanted)
        .map(|f| vec![FormElement::Field(f.clone())])
        .unwrap_or_default()
}

#[async_trait]
impl Decorator for Actions {
    fn child(&self) -> &Arc<dyn Collection> {
        &self.child
    }

    fn schema(&self) -> &CollectionSchema {
        &self.schema
    }

    async fn execute(
        &self,
        caller: &Caller,
        name: &str,
        filter: &Filter,
        values: &FormValues,
    ) -> Result<ActionResult> {
        let Some((action, handler)) = self.actions.get(name) else {
            return self.child.execute(caller, name, filter, values).await;
        };
        if action.scope == ActionScope::Single {
            check_single(self.child.as_ref(), caller, filter).await?;
        }
        let ctx = self.context(name, action, filter, values, None);
        handler.execute(caller, &ctx).await
    }

    async fn get_form(
        &self,
        caller: &Caller,
        name: &str,
        filter: &Filter,
        values: &FormValues,
        phase: &FormPhase,
    ) -> Result<Vec<FormElement>> {
        let Some((action, handler)) = self.actions.get(name) else {
            return self
                .child
                .get_form(caller, name, filter, values, phase)
                .await;
        };
        let form = match &action.static_form {
            Some(form) => fill(form, values),
            None => {
                let ctx = self.context(name, action, filter, values, phase.changed_field());
                handler.form(caller, &ctx, phase).await?
            }
        };
        Ok(match phase {
            FormPhase::Search { field, .. } => only_field(&form, field),
            _ => form,
        })
    }
}
