//! What an application token may do on the public API (public-api.md, Authentication §7). A
//! token's rights are its scopes intersected with its user's rights at the time of the call: a
//! scope never lets a non-admin read what admins only may read.

use std::fmt;
use std::str::FromStr;

/// One scope of an application token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    ActivityLogsRead,
    AdminLogsRead,
    NotesRead,
    NotesWrite,
    /// Start workflow runs through their webhooks (and the manual trigger).
    WorkflowsTrigger,
    /// Full API access: every other scope, and the endpoints no narrower scope names.
    All,
}

impl Scope {
    pub const ALL: [Self; 6] = [
        Self::ActivityLogsRead,
        Self::AdminLogsRead,
        Self::NotesRead,
        Self::NotesWrite,
        Self::WorkflowsTrigger,
        Self::All,
    ];

    /// The wire name (`notes:read`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ActivityLogsRead => "activity_logs:read",
            Self::AdminLogsRead => "admin_logs:read",
            Self::NotesRead => "notes:read",
            Self::NotesWrite => "notes:write",
            Self::WorkflowsTrigger => "workflows:trigger",
            Self::All => "all",
        }
    }

    /// Whether a token holding `held` may do what `self` guards. `notes:write` does not imply
    /// `notes:read`: a script that only files notes cannot read the others' (as on GitHub and
    /// Stripe, where write keys name their reads explicitly).
    pub fn granted_by(self, held: &[Self]) -> bool {
        held.iter().any(|h| *h == Self::All || *h == self)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|s| s.as_str()).collect();
                format!("unknown scope {s:?} (expected one of {})", known.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_round_trip_through_their_wire_names() {
        for scope in Scope::ALL {
            assert_eq!(scope.as_str().parse::<Scope>(), Ok(scope));
        }
        assert!("notes:delete".parse::<Scope>().is_err());
    }

    #[test]
    fn all_grants_everything_and_a_narrow_scope_only_itself() {
        assert!(Scope::NotesRead.granted_by(&[Scope::All]));
        assert!(Scope::NotesRead.granted_by(&[Scope::NotesRead]));
        assert!(!Scope::NotesRead.granted_by(&[Scope::NotesWrite]));
        assert!(!Scope::All.granted_by(&[Scope::NotesRead, Scope::NotesWrite]));
        assert!(!Scope::AdminLogsRead.granted_by(&[]));
    }
}
