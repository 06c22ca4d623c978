//! The action rules of §5.4, as the agent applies them
//! (`routes/modification/action/action-authorization.ts` over the `forestadmin-client`
//! permission service):
//! - trigger: the role's `triggerEnabled`, and with a trigger condition for the role, every
//!   selected record (scope included) must match it;
//! - requires approval (never in a development environment, whose document is `true`): the
//!   role's `approvalRequired`, unless it has a condition that no selected record matches;
//! - approve: `selfApprovalEnabled` when the caller filed the request, else
//!   `userApprovalEnabled`; with the role's approval condition (`userApprovalConditions`, for
//!   both), every selected record must match it;
//! - `roleIdsAllowedToApprove`: the roles with `userApprovalEnabled` and no condition, plus the
//!   roles whose condition matches every selected record, counted WITHOUT the user's scope;
//! - form hooks need `trigger` alone, without its conditions.
//!
//! As in the agent, a role's condition only applies when the right is granted by role
//! (`{roles:[…]}`): a right granted to everyone (`true`) has no conditions. Conditions are
//! evaluated by counting records (`aggregate Count`) with the condition AND-ed into the
//! selection; a tree that does not parse against the collection, or a count that fails, is
//! 422 `InvalidActionConditionError`. Leaves may carry `source: "data" | "input"`, which the
//! agent ignores, and so does this module: every leaf is read against the records.

use serde_json::Value as Json;

use super::{Error, Permissions, Result};
use crate::datasource::{
    Aggregation, Caller, Collection, CollectionSchema, ConditionTree, DataSourceSchema, Filter,
};
use crate::platform::documents::{ActionPermissions, EnvironmentPermissions, Grant, RoleCondition};

/// The four action rights (`custom:<collection>:<action>:<right>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionRight {
    Trigger,
    Approve,
    SelfApprove,
    RequireApproval,
}

impl ActionRight {
    /// The identifier's last part.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trigger => "trigger",
            Self::Approve => "approve",
            Self::SelfApprove => "self-approve",
            Self::RequireApproval => "require-approval",
        }
    }

    /// The grant and the per-role conditions of this right in an action's document.
    fn of(self, action: &ActionPermissions) -> (&Grant, &[RoleCondition]) {
        match self {
            Self::Trigger => (&action.trigger_enabled, &action.trigger_conditions),
            Self::Approve => (
                &action.user_approval_enabled,
                &action.user_approval_conditions,
            ),
            // The agent has no self-approval conditions: the approval ones apply.
            Self::SelfApprove => (&action.self_approval_enabled, &[]),
            Self::RequireApproval => (
                &action.approval_required,
                &action.approval_required_conditions,
            ),
        }
    }
}

/// One execution of an action to decide on: who, which action, and the selected records.
pub struct ActionRequest<'a> {
    pub caller: &'a Caller,
    /// The collection the action belongs to, to count records on.
    pub collection: &'a dyn Collection,
    pub collection_schema: &'a CollectionSchema,
    pub schema: &'a DataSourceSchema,
    /// The action's name (as declared, not its slug).
    pub action: &'a str,
    /// The selection with the caller's scope AND-ed in.
    pub filter_for_caller: &'a Filter,
    /// The same selection without any scope: `roleIdsAllowedToApprove` is about the records,
    /// not about what the caller may see.
    pub filter_for_all: &'a Filter,
}

/// What the environment document says of one right of one action.
#[derive(Debug, Clone, PartialEq)]
enum Rule {
    /// A development environment (document `true`): everything is allowed, no approvals.
    Development,
    /// The grant, and the conditions by role (only when granted by role).
    Granted {
        grant: Grant,
        conditions: Vec<RoleCondition>,
    },
}

impl Rule {
    fn allows(&self, role_id: Option<i64>) -> bool {
        match self {
            Self::Development => true,
            Self::Granted { grant, .. } => grant.allows(role_id),
        }
    }

    /// The role's condition, if the right is granted by role and the role has one (the last
    /// one wins, as the agent builds a map from the list).
    fn condition(&self, role_id: Option<i64>) -> Option<&Json> {
        let Self::Granted {
            grant: Grant::Roles { .. },
            conditions,
        } = self
        else {
            return None;
        };
        let role_id = role_id?;
        conditions
            .iter()
            .rev()
            .find(|c| c.role_id == role_id)
            .map(|c| &c.filter)
    }
}

impl Permissions {
    /// The rule of `right` on `action` of `collection`; an action the document does not list
    /// grants nothing.
    async fn action_rule(
        &self,
        collection: &str,
        action: &str,
        right: ActionRight,
    ) -> Result<Rule> {
        let environment = self.environment().await?;
        Ok(match &*environment {
            EnvironmentPermissions::AllowAll(true) => Rule::Development,
            EnvironmentPermissions::AllowAll(false) => Rule::Granted {
                grant: Grant::All(false),
                conditions: Vec::new(),
            },
            EnvironmentPermissions::Collections { collections } => {
                match EnvironmentPermissions::action(collections, collection, action) {
                    Some(permissions) => {
                        let (grant, conditions) = right.of(&permissions);
                        Rule::Granted {
                            grant: grant.clone(),
                            conditions: conditions.to_vec(),
                        }
                    }
                    None => Rule::Granted {
                        grant: Grant::All(false),
                        conditions: Vec::new(),
                    },
                }
            }
        })
    }

    /// Whether the caller's role has `right` (no conditions), refetching the documents once
    /// when it does not and the cache has a time to live, as the agent's `can` does.
    pub async fn can_on_action(
        &self,
        caller: &Caller,
        collection: &str,
        action: &str,
        right: ActionRight,
    ) -> Result<bool> {
        if !self.enforced() {
            return Ok(true);
        }
        let role_id = self.role_id(caller).await?;
        if self
            .action_rule(collection, action, right)
            .await?
            .allows(role_id)
        {
            return Ok(true);
        }
        if self.policy.refetch_on_denial() {
            self.environment.clear();
            self.users.clear();
            let role_id = self.role_id(caller).await?;
            return Ok(self
                .action_rule(collection, action, right)
                .await?
                .allows(role_id));
        }
        Ok(false)
    }

    /// The form hooks (load, change, search) and the form's values: `trigger` alone, no
    /// condition. Denied → 403 `ForbiddenError` without a message, as the agent's.
    pub async fn assert_can_request_action_parameters(
        &self,
        caller: &Caller,
        collection: &str,
        action: &str,
    ) -> Result<()> {
        if self
            .can_on_action(caller, collection, action, ActionRight::Trigger)
            .await?
        {
            return Ok(());
        }
        Err(Error::Forbidden(String::new()))
    }

    /// Running an action without an approval: trigger (with its condition), then approval
    /// required → 403 `CustomActionRequiresApprovalError` with the roles that may approve.
    pub async fn assert_can_trigger_action(&self, request: &ActionRequest<'_>) -> Result<()> {
        if !self.can_trigger(request).await? {
            tracing::debug!(
                user = request.caller.id,
                collection = request.collection_schema.name,
                action = request.action,
                "action trigger denied"
            );
            return Err(Error::ActionTriggerForbidden);
        }
        if self.requires_approval(request).await? {
            return Err(Error::ActionRequiresApproval {
                role_ids_allowed_to_approve: self.role_ids_allowed_to_approve(request).await?,
            });
        }
        Ok(())
    }

    /// Running an action filed by `requester_id` as its approver: self-approve when the caller
    /// filed it, else approve, and the approval condition on every selected record.
    pub async fn assert_can_approve_action(
        &self,
        request: &ActionRequest<'_>,
        requester_id: i64,
    ) -> Result<()> {
        if self.can_approve(request, requester_id).await? {
            return Ok(());
        }
        Err(Error::ApprovalNotAllowed {
            role_ids_allowed_to_approve: self.role_ids_allowed_to_approve(request).await?,
        })
    }

    async fn can_trigger(&self, request: &ActionRequest<'_>) -> Result<bool> {
        let collection = &request.collection_schema.name;
        if !self
            .can_on_action(
                request.caller,
                collection,
                request.action,
                ActionRight::Trigger,
            )
            .await?
        {
            return Ok(false);
        }
        let role_id = self.role_id(request.caller).await?;
        let rule = self
            .action_rule(collection, request.action, ActionRight::Trigger)
            .await?;
        self.all_match(request, request.filter_for_caller, rule.condition(role_id))
            .await
    }

    /// Whether this execution needs an approval first.
    pub async fn requires_approval(&self, request: &ActionRequest<'_>) -> Result<bool> {
        let collection = &request.collection_schema.name;
        // A development environment allows everything, approvals included, and asks for none.
        let rule = self
            .action_rule(collection, request.action, ActionRight::RequireApproval)
            .await?;
        if rule == Rule::Development {
            return Ok(false);
        }
        if !self
            .can_on_action(
                request.caller,
                collection,
                request.action,
                ActionRight::RequireApproval,
            )
            .await?
        {
            return Ok(false);
        }
        let role_id = self.role_id(request.caller).await?;
        let rule = self
            .action_rule(collection, request.action, ActionRight::RequireApproval)
            .await?;
        match rule.condition(role_id) {
            // Required as soon as one selected record matches the condition.
            Some(condition) => {
                Ok(count(request, request.filter_for_caller, Some(condition)).await? > 0)
            }
            None => Ok(true),
        }
    }

    /// Whether the caller may approve this execution filed by `requester_id`.
    pub async fn can_approve(
        &self,
        request: &ActionRequest<'_>,
        requester_id: i64,
    ) -> Result<bool> {
        let collection = &request.collection_schema.name;
        let right = if requester_id == request.caller.id {
            ActionRight::SelfApprove
        } else {
            ActionRight::Approve
        };
        if !self
            .can_on_action(request.caller, collection, request.action, right)
            .await?
        {
            return Ok(false);
        }
        let role_id = self.role_id(request.caller).await?;
        let rule = self
            .action_rule(collection, request.action, ActionRight::Approve)
            .await?;
        self.all_match(request, request.filter_for_caller, rule.condition(role_id))
            .await
    }

    /// The roles that may approve this execution: those granted `userApprovalEnabled` without a
    /// condition, then those whose condition every selected record matches (selection without
    /// scope). Conditions shared by several roles are counted once.
    ///
    /// A grant to everyone (`true`) lists the roles of every user of the project: the agent would
    /// list none there (its server never sends `true` for this right).
    pub async fn role_ids_allowed_to_approve(
        &self,
        request: &ActionRequest<'_>,
    ) -> Result<Vec<i64>> {
        let rule = self
            .action_rule(
                &request.collection_schema.name,
                request.action,
                ActionRight::Approve,
            )
            .await?;
        let (roles, conditions) = match rule {
            Rule::Development => return Ok(Vec::new()),
            Rule::Granted {
                grant: Grant::All(false),
                ..
            } => return Ok(Vec::new()),
            Rule::Granted {
                grant: Grant::All(true),
                ..
            } => {
                let mut roles: Vec<i64> = self
                    .users()
                    .await?
                    .values()
                    .filter_map(|u| u.role_id)
                    .collect();
                roles.sort_unstable();
                roles.dedup();
                return Ok(roles);
            }
            Rule::Granted {
                grant: Grant::Roles { roles },
                conditions,
            } => (roles, conditions),
        };
        // The conditions by role (the last one of a role wins), in the order of the list.
        let mut by_role: Vec<(i64, Json)> = Vec::new();
        for condition in conditions {
            match by_role
                .iter_mut()
                .find(|(role, _)| *role == condition.role_id)
            {
                Some(entry) => entry.1 = condition.filter,
                None => by_role.push((condition.role_id, condition.filter)),
            }
        }
        let mut allowed: Vec<i64> = Vec::new();
        for role in &roles {
            if !by_role.iter().any(|(r, _)| r == role) && !allowed.contains(role) {
                allowed.push(*role);
            }
        }
        // Only roles that have the right: a condition of a role without it does not make it an
        // approver (the agent would list it).
        by_role.retain(|(role, _)| roles.contains(role));
        if by_role.is_empty() {
            return Ok(allowed);
        }
        let mut groups: Vec<(Json, Vec<i64>)> = Vec::new();
        for (role, condition) in by_role {
            match groups.iter_mut().find(|(c, _)| *c == condition) {
                Some((_, roles)) => roles.push(role),
                None => groups.push((condition, vec![role])),
            }
        }
        let total = count(request, request.filter_for_all, None).await?;
        for (condition, roles) in groups {
            if count(request, request.filter_for_all, Some(&condition)).await? == total {
                allowed.extend(roles);
            }
        }
        Ok(allowed)
    }

    /// Without a condition, true; with one, whether every record of `filter` matches it.
    async fn all_match(
        &self,
        request: &ActionRequest<'_>,
        filter: &Filter,
        condition: Option<&Json>,
    ) -> Result<bool> {
        let Some(condition) = condition else {
            return Ok(true);
        };
        let total = count(request, filter, None).await?;
        let matching = count(request, filter, Some(condition)).await?;
        Ok(total == matching)
    }
}

/// The number of records of `filter`, further restricted by `condition`. Any failure, the
/// parse of the condition as much as the count itself, is the agent's
/// `InvalidActionConditionError`.
async fn count(
    request: &ActionRequest<'_>,
    filter: &Filter,
    condition: Option<&Json>,
) -> Result<u64> {
    let invalid = |detail: String| {
        tracing::warn!(
            collection = request.collection_schema.name,
            action = request.action,
            %detail,
            "action condition cannot be evaluated"
        );
        Error::InvalidActionCondition(detail)
    };
    let filter = match condition {
        Some(condition) => {
            let tree = ConditionTree::parse(condition, request.collection_schema, request.schema)
                .map_err(|e| invalid(e.to_string()))?;
            filter.clone().and(Some(tree))
        }
        None => filter.clone(),
    };
    let rows = request
        .collection
        .aggregate(request.caller, &filter, &Aggregation::count(), None)
        .await
        .map_err(|e| invalid(e.to_string()))?;
    // A count is a non-negative integer; `as` saturates, and no row means 0.
    Ok(rows
        .first()
        .and_then(|row| row.value.as_f64())
        .map_or(0, |n| n as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn granted(grant: Grant, conditions: &[(i64, Json)]) -> Rule {
        Rule::Granted {
            grant,
            conditions: conditions
                .iter()
                .map(|(role_id, filter)| RoleCondition {
                    role_id: *role_id,
                    filter: filter.clone(),
                })
                .collect(),
        }
    }

    #[test]
    fn conditions_apply_only_to_rights_granted_by_role() {
        let tree = json!({"field": "id", "operator": "equal", "value": 1});
        let everyone = granted(Grant::All(true), &[(1, tree.clone())]);
        assert!(everyone.allows(Some(1)));
        assert_eq!(everyone.condition(Some(1)), None);
        let by_role = granted(Grant::Roles { roles: vec![1, 2] }, &[(1, tree.clone())]);
        assert_eq!(by_role.condition(Some(1)), Some(&tree));
        assert_eq!(by_role.condition(Some(2)), None);
        assert_eq!(by_role.condition(None), None);
        assert!(!by_role.allows(Some(3)));
        assert!(Rule::Development.allows(None));
    }

    #[test]
    fn the_last_condition_of_a_role_wins() {
        let first = json!({"field": "id", "operator": "equal", "value": 1});
        let last = json!({"field": "id", "operator": "equal", "value": 2});
        let rule = granted(
            Grant::Roles { roles: vec![1] },
            &[(1, first), (1, last.clone())],
        );
        assert_eq!(rule.condition(Some(1)), Some(&last));
    }

    #[test]
    fn right_identifiers_are_the_agents() {
        let names: Vec<_> = [
            ActionRight::Trigger,
            ActionRight::Approve,
            ActionRight::SelfApprove,
            ActionRight::RequireApproval,
        ]
        .map(ActionRight::as_str)
        .into();
        assert_eq!(
            names,
            ["trigger", "approve", "self-approve", "require-approval"]
        );
    }
}
