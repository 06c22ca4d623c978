//! Singular and plural forms for relation names, as npm `pluralize` 8.0.0 gives them (§14.5).
//!
//! The `pluralizer` crate ports a newer `pluralize` (its GitHub master). Three things differ
//! from 8.0.0 and are corrected here rather than by writing another pluralizer:
//! 1. master added irregular words (`my`/`our`, `its`/`his`/`her`/`their`, `canvas`) and removed
//!    `species` from the uncountable words: [`WORDS_8_0_0`] gives 8.0.0's results for them;
//! 2. master replaced the singular rule for `…ies` → `…ie` (`cookies` → `cookie`; 8.0.0 says
//!    `cooky`): [`singular_ies`] re-applies 8.0.0's rule;
//! 3. the crate takes the case of a replacement from the whole word, npm from the replaced
//!    letters (`fooURL` → npm `fooURLS`, crate `fooURLs`): words are inflected in lower case and
//!    [`restore_case`] gives the changed tail npm's case.
//!
//! Rules apply to the end of the whole string, so `user_id` → `user_ids`, `ORDERS` → `ORDER`.

use std::sync::LazyLock;

use regex::Regex;

/// The plural form (`person` → `people`, `status` → `statuses`, `data` → `data`).
pub fn plural(word: &str) -> String {
    inflect(word, true)
}

/// The singular form (`people` → `person`, `data` → `datum`, `UserAccounts` → `UserAccount`).
pub fn singular(word: &str) -> String {
    inflect(word, false)
}

/// Whole words whose 8.0.0 forms differ from the crate's: (word, plural, singular).
const WORDS_8_0_0: &[(&str, &str, &str)] = &[
    ("my", "mies", "my"),
    ("our", "ours", "our"),
    ("its", "its", "it"),
    ("his", "his", "hi"),
    ("her", "hers", "her"),
    ("their", "theirs", "their"),
    ("canvas", "canvas", "canva"),
    ("canvases", "canvases", "canvase"),
    ("species", "species", "species"),
];

fn inflect(word: &str, to_plural: bool) -> String {
    let token = word.to_lowercase();
    let inflected = match WORDS_8_0_0.iter().find(|(w, _, _)| *w == token) {
        Some((_, p, s)) => (if to_plural { *p } else { *s }).to_owned(),
        None if to_plural => pluralizer::pluralize(&token, 2, false),
        None => {
            let crate_form = pluralizer::pluralize(&token, 1, false);
            singular_ies(&token, &crate_form).unwrap_or(crate_form)
        }
    };
    restore_case(word, &token, &inflected)
}

/// 8.0.0's singular of a word ending in `ies`, when the crate's differs only because of the
/// rule master changed: both versions end with `ies` → `y` overridden by `ies` → `ie` for some
/// stems; the later rules (`movies`, `monies`, `indices`…) are the same in both and win.
fn singular_ies(token: &str, crate_form: &str) -> Option<String> {
    static IE_8_0_0: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(
            r"\b([pl]|zomb|(?:neck|cross)?t|coll|faer|food|gen|goon|group|lass|talk|goal|cut)ies$",
        )
        .ok()
    });
    static LATER_RULES: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"(movie|twelve|abuse|e[mn]u)s$|\b(mon|smil)ies$|(cod|mur|sil|vert|ind|matr|append)ices$").ok()
    });
    let stem = token.strip_suffix("ies")?;
    let (ie, y) = (format!("{stem}ie"), format!("{stem}y"));
    if (crate_form != ie && crate_form != y) || LATER_RULES.as_ref()?.is_match(token) {
        return None;
    }
    Some(if IE_8_0_0.as_ref()?.is_match(token) {
        ie
    } else {
        y
    })
}

/// Gives `inflected` (lower case) the case of `word` as npm `pluralize` does: the letters kept
/// from the word keep their case; the replaced tail takes the case of the letters it replaces
/// (or of the last kept letter when the rule only appends, `fooURL` → `fooURLS`).
fn restore_case(word: &str, token: &str, inflected: &str) -> String {
    if inflected == token {
        return word.to_owned();
    }
    let original: Vec<char> = word.chars().collect();
    if original.len() != token.chars().count() {
        // Lower-casing changed the length (rare Unicode letters): keep the lower-case form.
        return inflected.to_owned();
    }
    let kept = token
        .chars()
        .zip(inflected.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let tail: String = inflected.chars().skip(kept).collect();
    let sample: String = if kept < original.len() {
        original[kept..].iter().collect()
    } else {
        original[..kept]
            .last()
            .map(|c| c.to_string())
            .unwrap_or_default()
    };
    let mut out: String = original[..kept].iter().collect();
    out.push_str(&case_like(&sample, &tail));
    out
}

/// npm `restoreCase(sample, text)`.
fn case_like(sample: &str, text: &str) -> String {
    if sample == text || sample == sample.to_lowercase() {
        return text.to_lowercase();
    }
    if sample == sample.to_uppercase() {
        return text.to_uppercase();
    }
    if sample.chars().next().is_some_and(char::is_uppercase) {
        let mut chars = text.chars();
        return match chars.next() {
            Some(first) => first
                .to_uppercase()
                .chain(chars.flat_map(char::to_lowercase))
                .collect(),
            None => String::new(),
        };
    }
    text.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every example of §14.5, as npm `pluralize` 8.0.0 gives them.
    #[test]
    fn spec_examples() {
        for (word, p, s) in [
            ("order_items", "order_items", "order_item"),
            ("status", "statuses", "status"),
            ("data", "data", "datum"),
            ("metadata", "metadata", "metadatum"),
            ("people", "people", "person"),
            ("categories", "categories", "category"),
            ("news", "news", "news"),
            ("media", "media", "media"),
            ("series", "series", "series"),
            ("species", "species", "species"),
            ("sheep", "sheep", "sheep"),
            ("information", "information", "information"),
            ("equipment", "equipment", "equipment"),
            ("staff", "staff", "staff"),
            ("axis", "axes", "axi"),
        ] {
            assert_eq!(plural(word), p, "plural({word})");
            assert_eq!(singular(word), s, "singular({word})");
        }
        for (word, p) in [
            ("person", "people"),
            ("child", "children"),
            ("company", "companies"),
            ("address", "addresses"),
            ("analysis", "analyses"),
            ("index", "indices"),
            ("matrix", "matrices"),
            ("virus", "viri"),
            ("leaf", "leaves"),
            ("life", "lives"),
            ("quiz", "quizzes"),
            ("hero", "heroes"),
            ("photo", "photos"),
            ("user_id", "user_ids"),
        ] {
            assert_eq!(plural(word), p, "plural({word})");
        }
        for (word, s) in [
            ("criteria", "criterion"),
            ("UserAccounts", "UserAccount"),
            ("ORDERS", "ORDER"),
            ("Users", "User"),
        ] {
            assert_eq!(singular(word), s, "singular({word})");
        }
    }

    /// Names of the relation examples of §14.5.
    #[test]
    fn relation_example_words() {
        assert_eq!(plural("employees"), "employees");
        assert_eq!(plural("uuid_child"), "uuid_children");
        assert_eq!(plural("by_email"), "by_emails");
        assert_eq!(plural("follower"), "followers");
        assert_eq!(singular("people"), "person");
        assert_eq!(singular("posts"), "post");
        assert_eq!(plural("posts"), "posts");
        assert_eq!(singular("user"), "user");
        assert_eq!(plural("user"), "users");
        assert_eq!(plural("profile"), "profiles");
        assert_eq!(singular("profiles"), "profile");
    }

    /// Where the crate (pluralize master) differs from 8.0.0; expected values from 8.0.0 itself.
    #[test]
    fn differences_from_the_crate_are_corrected() {
        for (word, p, s) in [
            ("cookies", "cookies", "cooky"),
            ("hippies", "hippies", "hippy"),
            ("calories", "calories", "calory"),
            ("zombies", "zombies", "zombie"),
            ("pies", "pies", "pie"),
            ("movies", "movies", "movie"),
            ("memories", "memories", "memory"),
            ("entries", "entries", "entry"),
            ("my", "mies", "my"),
            ("our", "ours", "our"),
            ("its", "its", "it"),
            ("his", "his", "hi"),
            ("her", "hers", "her"),
            ("their", "theirs", "their"),
            ("canvas", "canvas", "canva"),
            ("canvases", "canvases", "canvase"),
            ("fooURL", "fooURLS", "fooURL"),
            ("tblUSER", "tblUSERS", "tblUSER"),
            ("userID", "userIDS", "userID"),
            ("Person", "People", "Person"),
            ("PEOPLE", "PEOPLE", "PERSON"),
            ("Category", "Categories", "Category"),
            ("CATEGORIES", "CATEGORIES", "CATEGORY"),
            ("statusHistories", "statusHistories", "statusHistory"),
            ("OrderItems", "OrderItems", "OrderItem"),
            ("Data", "Data", "Datum"),
        ] {
            assert_eq!(plural(word), p, "plural({word})");
            assert_eq!(singular(word), s, "singular({word})");
        }
    }
}
