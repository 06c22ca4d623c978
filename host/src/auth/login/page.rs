//! The built-in sign-in page: plain server-rendered HTML, one form, no script. Every value
//! written into the page is escaped.

/// The sign-in form.
#[derive(Debug, Clone, Copy)]
pub struct SignInForm<'a> {
    /// Where the form posts (the sign-in path).
    pub action: &'a str,
    /// The signed login request.
    pub request: &'a str,
    /// The CSRF token tied to the browser's cookie.
    pub csrf: &'a str,
    /// The email typed before, kept after a failure.
    pub email: &'a str,
    /// The failure to show above the form.
    pub error: Option<&'a str>,
}

/// Escapes text for HTML content and double-quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;background:#f4f6f4;margin:0;\
display:flex;min-height:100vh;align-items:center;justify-content:center}\
main{background:#fff;padding:2rem 2.5rem;border-radius:8px;box-shadow:0 1px 4px #0002;\
width:20rem}h1{font-size:1.3rem;margin:0 0 1.2rem}label{display:block;margin:.8rem 0 .3rem}\
input[type=email],input[type=password]{width:100%;box-sizing:border-box;padding:.5rem;\
font-size:1rem}button{margin-top:1.2rem;width:100%;padding:.6rem;font-size:1rem;\
background:#2f6b3a;color:#fff;border:0;border-radius:4px;cursor:pointer}\
p.error{color:#a32020;background:#fbeaea;padding:.5rem;border-radius:4px}";

fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title}</title><style>{STYLE}</style></head><body><main>{body}</main></body></html>\n",
        title = escape(title),
    )
}

/// The page with the form.
pub fn sign_in(form: &SignInForm<'_>) -> String {
    let error = form
        .error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(e)))
        .unwrap_or_default();
    let body = format!(
        "<h1>Sign in to Canopy</h1>{error}\
<form method=\"post\" action=\"{action}\">\
<input type=\"hidden\" name=\"request\" value=\"{request}\">\
<input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
<label for=\"email\">Email</label>\
<input id=\"email\" type=\"email\" name=\"email\" value=\"{email}\" autocomplete=\"username\" required autofocus>\
<label for=\"password\">Password</label>\
<input id=\"password\" type=\"password\" name=\"password\" autocomplete=\"current-password\" required>\
<button type=\"submit\">Sign in</button></form>",
        action = escape(form.action),
        request = escape(form.request),
        csrf = escape(form.csrf),
        email = escape(form.email),
    );
    document("Sign in to Canopy", &body)
}

/// The MCP authorization page: which application asks for what, and the sign-in that grants
/// it (the built-in password form, or a button to the OpenID provider).
#[derive(Debug, Clone, Copy)]
pub struct ConsentForm<'a> {
    /// Where the form posts (the authorization endpoint).
    pub action: &'a str,
    pub request: &'a str,
    pub csrf: &'a str,
    pub email: &'a str,
    pub error: Option<&'a str>,
    /// The client's registered name, or its id.
    pub client: &'a str,
    /// Where the browser goes back to (the redirect URI's host): the user should recognize it.
    pub redirect_host: &'a str,
    /// The scopes asked for, space separated.
    pub scopes: &'a str,
    /// The OpenID provider's issuer when sign-in goes through it (no password fields then).
    pub provider: Option<&'a str>,
}

/// The page with the consent form.
pub fn consent(form: &ConsentForm<'_>) -> String {
    let error = form
        .error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(e)))
        .unwrap_or_default();
    let credentials = match form.provider {
        Some(issuer) => format!(
            "<input type=\"hidden\" name=\"sso\" value=\"1\"><p>You will sign in with {}.</p>",
            escape(issuer)
        ),
        None => format!(
            "<label for=\"email\">Email</label>\
<input id=\"email\" type=\"email\" name=\"email\" value=\"{email}\" autocomplete=\"username\" required autofocus>\
<label for=\"password\">Password</label>\
<input id=\"password\" type=\"password\" name=\"password\" autocomplete=\"current-password\" required>",
            email = escape(form.email)
        ),
    };
    let body = format!(
        "<h1>Allow {client} to use Canopy as you?</h1>{error}\
<p><strong>{client}</strong> (returning to {host}) asks for: {scopes}. It will act with your \
permissions, and every call is logged.</p>\
<form method=\"post\" action=\"{action}\">\
<input type=\"hidden\" name=\"request\" value=\"{request}\">\
<input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">{credentials}\
<button type=\"submit\" name=\"decision\" value=\"allow\">Sign in and allow</button>\
<button type=\"submit\" name=\"decision\" value=\"deny\" formnovalidate \
style=\"background:#777\">Deny</button></form>",
        client = escape(form.client),
        host = escape(form.redirect_host),
        scopes = escape(form.scopes),
        action = escape(form.action),
        request = escape(form.request),
        csrf = escape(form.csrf),
    );
    document("Allow access to Canopy", &body)
}

/// A page with a title and one message (expired links, too many attempts).
pub fn message(title: &str, text: &str) -> String {
    document(
        title,
        &format!("<h1>{}</h1><p>{}</p>", escape(title), escape(text)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped() {
        let page = sign_in(&SignInForm {
            action: "/forest/authentication/sign-in",
            request: "r.s",
            csrf: "c",
            email: "\"><script>alert(1)</script>",
            error: Some("<b>"),
        });
        assert!(!page.contains("<script>"));
        assert!(page.contains("&quot;&gt;&lt;script&gt;"));
        assert!(page.contains("&lt;b&gt;"));
        assert!(page.contains("name=\"request\" value=\"r.s\""));
    }
}
