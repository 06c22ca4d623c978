//! Application tokens of the public API (issue 12 §1) as a caller manages them: their own tokens
//! (any enabled user), or everyone's (an admin, in the console's administration). The `/v1`
//! token routes and the console are adapters over these functions.
//!
//! The store writes the admin log entry of a creation or a revocation in the same transaction
//! (never the secret, its hash or its hint); the secret leaves this module once, in the answer
//! to [`create`], and is never logged.

use crate::auth::tokens::TokenVerifier;
use crate::datasource::{Caller, PermissionLevel};
use crate::platform::{Actor, NewToken, Store, Token, TokenSecret, User};

use super::{Error, Ops, Result};

/// A token with the user it acts for, as the administration lists it.
#[derive(Debug, Clone)]
pub struct Owned {
    pub token: Token,
    /// The owner's email; empty when the owner is gone (their tokens go with them).
    pub owner: String,
}

/// Canopy's store, which every token operation needs.
pub(crate) fn store(ops: &Ops) -> Result<&Store> {
    ops.store.as_ref().ok_or(Error::Unavailable)
}

/// The admin log's initiator for `caller`: `administrator` is the one value of the §1.3 enum for
/// a person acting through the API or the console (a user managing their own tokens is one too).
/// The `/v1` admin routes write theirs with it too.
pub(crate) fn actor(caller: &Caller) -> Actor {
    Actor::Administrator {
        user_id: caller.id,
        email: caller.email.clone(),
        // As `User::full_name` writes it: a user without a last name is not "Admin ".
        name: format!("{} {}", caller.first_name, caller.last_name)
            .trim()
            .to_owned(),
    }
}

/// The caller as the store knows them now, refused (403) unless they exist, are enabled and are
/// an admin: a session minted before a demotion must not keep the administration.
pub(crate) async fn require_admin(ops: &Ops, caller: &Caller) -> Result<User> {
    match store(ops)?.user(caller.id).await? {
        Some(user) if !user.disabled && user.permission_level == PermissionLevel::Admin => Ok(user),
        _ => Err(crate::auth::Error::forbidden().into()),
    }
}

/// The caller's live tokens.
pub async fn mine(ops: &Ops, caller: &Caller) -> Result<Vec<Token>> {
    Ok(store(ops)?.tokens(Some(caller.id)).await?)
}

/// Every live token of the project with its owner: admins only.
pub async fn all(ops: &Ops, caller: &Caller) -> Result<Vec<Owned>> {
    require_admin(ops, caller).await?;
    let store = store(ops)?;
    let users = store.users().await?;
    let tokens = store.tokens(None).await?;
    Ok(tokens
        .into_iter()
        .map(|token| {
            let owner = users
                .iter()
                .find(|u| u.id == token.user_id)
                .map(|u| u.email.clone())
                .unwrap_or_default();
            Owned { token, owner }
        })
        .collect())
}

/// Makes a token acting for the caller; the secret is returned this once.
pub async fn create(ops: &Ops, caller: &Caller, new: NewToken) -> Result<(Token, TokenSecret)> {
    Ok(store(ops)?
        .create_token(&actor(caller), caller.id, new)
        .await?)
}

/// Revokes the token `id`: the caller's own, or anyone's for an admin. Someone else's token is
/// none of a non-admin's business, not even its existence: it is "not found" to them. The
/// verifier of this instance forgets it at once (the others within their cache's lifetime).
pub async fn revoke(
    ops: &Ops,
    caller: &Caller,
    id: &str,
    verifier: Option<&TokenVerifier>,
) -> Result<()> {
    let store = store(ops)?;
    let not_found = || Error::Platform(crate::platform::Error::NotFound(format!("token {id:?}")));
    let token = store.token(id).await?.ok_or_else(not_found)?;
    if token.user_id != caller.id && caller.permission_level != PermissionLevel::Admin {
        return Err(not_found());
    }
    if token.user_id != caller.id {
        require_admin(ops, caller).await.map_err(|_| not_found())?;
    }
    if !store.revoke_token(&actor(caller), id).await? {
        return Err(not_found());
    }
    if let Some(verifier) = verifier {
        verifier.forget(id);
    }
    tracing::info!(token = %id, by = caller.id, "application token revoked");
    Ok(())
}
