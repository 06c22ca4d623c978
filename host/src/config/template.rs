//! `customizeErrorMessage` as a message template: the Node agent takes a function, a binary takes
//! a string with placeholders.

use std::fmt;

/// A message template for unexpected errors. Placeholders: `{message}` (the error's own message)
/// and `{name}` (its error name, e.g. `InternalServerError`); `{{` and `}}` write literal braces.
#[derive(Clone, PartialEq, Eq)]
pub struct ErrorMessageTemplate {
    parts: Vec<Part>,
    source: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Message,
    Name,
}

impl ErrorMessageTemplate {
    /// Checks the template once at startup, so rendering never fails at request time.
    pub fn parse(source: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut chars = source.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    let mut closed = false;
                    for c in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        name.push(c);
                    }
                    if !closed {
                        return Err("has an unclosed `{`; write `{{` for a literal brace".into());
                    }
                    let part = match name.as_str() {
                        "message" => Part::Message,
                        "name" => Part::Name,
                        _ => {
                            return Err(format!(
                                "has an unknown placeholder `{{{name}}}`; use {{message}} or {{name}}, \
                                 and {{{{ or }}}} for a literal brace"
                            ));
                        }
                    };
                    if !text.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                    }
                    parts.push(part);
                }
                '}' => return Err("has an unmatched `}`; write `}}` for a literal brace".into()),
                _ => text.push(c),
            }
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Self {
            parts,
            source: source.to_owned(),
        })
    }

    /// The message shown in the UI for an unexpected error.
    pub fn render(&self, name: &str, message: &str) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Message => out.push_str(message),
                Part::Name => out.push_str(name),
            }
        }
        out
    }

    /// The template as written in the configuration.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl fmt::Debug for ErrorMessageTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ErrorMessageTemplate")
            .field(&self.source)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorMessageTemplate;

    #[test]
    fn placeholders_and_escaped_braces_render() {
        let template = ErrorMessageTemplate::parse("{{Oops}} {name}: {message}!").unwrap();
        assert_eq!(
            template.render("InternalServerError", "db down"),
            "{Oops} InternalServerError: db down!"
        );
        let plain = ErrorMessageTemplate::parse("Something went wrong").unwrap();
        assert_eq!(plain.render("E", "m"), "Something went wrong");
    }

    #[test]
    fn unknown_placeholders_and_stray_braces_are_refused() {
        assert!(
            ErrorMessageTemplate::parse("{stack}")
                .unwrap_err()
                .contains("{stack}")
        );
        assert!(ErrorMessageTemplate::parse("a } b").is_err());
        assert!(ErrorMessageTemplate::parse("{message").is_err());
    }
}
