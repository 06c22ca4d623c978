//! Passwords of the built-in sign-in: argon2id with a random salt, stored as PHC strings, checked
//! in constant time by the argon2 crate.

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

use super::{Error, Result};

/// The shortest password accepted.
pub const MIN_LENGTH: usize = 8;

/// The PHC string of `password` (argon2id, default parameters, random salt).
pub fn hash(password: &str) -> Result<String> {
    if password.chars().count() < MIN_LENGTH {
        return Err(Error::Invalid(format!(
            "a password needs at least {MIN_LENGTH} characters"
        )));
    }
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| Error::Invalid(format!("could not hash the password: {e}")))
}

/// Whether `password` matches the stored PHC string. A malformed stored hash never matches.
pub fn verify(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// Spends the time of one verification without a stored hash, so that an unknown email takes as
/// long to refuse as a wrong password (no user enumeration by timing).
pub fn verify_dummy(password: &str) {
    static DUMMY: std::sync::LazyLock<Option<String>> =
        std::sync::LazyLock::new(|| hash("canopy-dummy-password").ok());
    if let Some(stored) = DUMMY.as_deref() {
        let _ = verify(password, stored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let stored = hash("correct horse").unwrap();
        assert!(stored.starts_with("$argon2id$"));
        assert!(verify("correct horse", &stored));
        assert!(!verify("correct horsf", &stored));
        assert!(!verify("correct horse", "not a phc string"));
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(matches!(hash("short"), Err(Error::Invalid(_))));
    }
}
