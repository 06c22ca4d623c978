//! Message HTML through HTTP against an XSS corpus, on SQLite and PostgreSQL stores: what is
//! stored and shown is exactly the allowlisted markup (paragraphs, breaks, emphasis, lists,
//! quotes, code, http/https/mailto links with `rel="noopener noreferrer"`), whatever the input:
//! scripts, event handlers, `javascript:` and `data:` URLs, SVG and MathML, styles, frames,
//! comments and broken markup. A message with no text left is a 400 and changes nothing.

use axum::http::StatusCode;
use canopy_e2e::Backend;
use serde_json::json;

use crate::admin::{call, error, on_store_backends, serve, token_for};
use crate::notes::base;

/// (input, what comes out).
const CORPUS: &[(&str, &str)] = &[
    // Kept as is.
    (
        "<p>Hi <strong>a</strong> <b>b</b> <em>c</em> <i>d</i> <u>e</u> <s>f</s><br>g</p>",
        "<p>Hi <strong>a</strong> <b>b</b> <em>c</em> <i>d</i> <u>e</u> <s>f</s><br>g</p>",
    ),
    (
        "<blockquote><ul><li><code>x</code></li></ul><ol><li>y</li></ol></blockquote><pre>z</pre>",
        "<blockquote><ul><li><code>x</code></li></ul><ol><li>y</li></ol></blockquote><pre>z</pre>",
    ),
    // Links: http, https and mailto only, always with rel; other attributes dropped.
    (
        r#"<a href="https://ok.io/p?q=1" target="_blank" onmouseover="alert(1)">ok</a>"#,
        r#"<a href="https://ok.io/p?q=1" rel="noopener noreferrer">ok</a>"#,
    ),
    (
        r#"<a href="mailto:a@b.io" rel="opener">m</a>"#,
        r#"<a href="mailto:a@b.io" rel="noopener noreferrer">m</a>"#,
    ),
    (
        r#"<a href="javascript:alert(1)">x</a>"#,
        r#"<a rel="noopener noreferrer">x</a>"#,
    ),
    (
        r#"<a href="JaVaScRiPt:alert(1)">x</a>"#,
        r#"<a rel="noopener noreferrer">x</a>"#,
    ),
    (
        r#"<a href="jav&#x09;ascript:alert(1)">x</a>"#,
        r#"<a rel="noopener noreferrer">x</a>"#,
    ),
    (
        r#"<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>"#,
        r#"<a rel="noopener noreferrer">x</a>"#,
    ),
    (
        r#"<a href="vbscript:msgbox(1)">x</a>"#,
        r#"<a rel="noopener noreferrer">x</a>"#,
    ),
    (
        r#"<a href="/admin">x</a>"#,
        r#"<a rel="noopener noreferrer">x</a>"#,
    ),
    // Scripts and event handlers.
    ("<script>alert(1)</script><p>ok</p>", "<p>ok</p>"),
    (
        r#"<p onclick="alert(1)" style="x" class="c" id="i" title="t">hi</p>"#,
        "<p>hi</p>",
    ),
    ("<img src=x onerror=alert(1)>hi", "hi"),
    ("<body onload=alert(1)>hi</body>", "hi"),
    (
        r#"<div><span onfocus="alert(1)" tabindex=1>hi</span></div>"#,
        "hi",
    ),
    // SVG and MathML: gone with their content.
    ("<svg><script>alert(1)</script></svg>ok", "ok"),
    (
        "<p>a</p><svg onload=alert(1)><circle r=1 /></svg>",
        "<p>a</p>",
    ),
    (
        r#"<math><mi xlink:href="javascript:alert(1)">x</mi></math>ok"#,
        "ok",
    ),
    (
        r#"<svg><a xlink:href="javascript:alert(1)"><text>x</text></a></svg>ok"#,
        "ok",
    ),
    // Styles, frames, plugins, forms.
    (
        r#"<style>p{color:red}</style><p style="color:red">x</p>"#,
        "<p>x</p>",
    ),
    (r#"<iframe src="https://evil.io"></iframe>ok"#, "ok"),
    (
        r#"<iframe srcdoc="<script>alert(1)</script>"></iframe>ok"#,
        "ok",
    ),
    (
        r#"<object data="x.swf"></object><embed src="x.swf">ok"#,
        "ok",
    ),
    (
        r#"<form action="https://evil.io"><input value="v"><button>b</button></form>"#,
        "b",
    ),
    (
        r#"<meta http-equiv="refresh" content="0;url=javascript:alert(1)">ok"#,
        "ok",
    ),
    (
        r#"<link rel="stylesheet" href="https://evil.io/x.css">ok"#,
        "ok",
    ),
    (r#"<base href="https://evil.io/">ok"#, "ok"),
    // Comments and broken markup.
    ("<!-- <script>alert(1)</script> -->ok", "ok"),
    ("<p>unclosed <b>bold", "<p>unclosed <b>bold</b></p>"),
    (
        "<<script>script>alert(1)<</script>/script>",
        "&lt;/script&gt;",
    ),
    (
        r#"<p title="</p><script>alert(1)</script>">x</p>"#,
        "<p>x</p>",
    ),
    (
        // The mXSS classic: the noscript's text (dropped with it) ends at `</noscript>`, the img
        // goes with its handler, and what is left is escaped text.
        r#"<noscript><p title="</noscript><img src=x onerror=alert(1)>">"#,
        "\"&gt;",
    ),
    ("<template><script>alert(1)</script></template>ok", "ok"),
    ("<textarea><script>alert(1)</script></textarea>ok", "ok"),
    ("a < b & c > d", "a &lt; b &amp; c &gt; d"),
    // Nothing readable left: refused.
    ("<script>alert(1)</script>", ""),
    (
        r#"<img src=x onerror=alert(1)><svg onload=alert(1)></svg>"#,
        "",
    ),
];

async fn messages_are_sanitised_against_an_xss_corpus(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    let admin = token_for(store, "admin@canopy.local").await;
    let t = Some(admin.as_str());
    let base = base(store);
    let (status, note) = call(
        app,
        "POST",
        &base,
        t,
        Some(
            &json!({"collectionName": "orders", "recordId": "1", "title": "XSS",
            "content": "<p>start</p><script>alert(1)</script>"}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(note["messages"][0]["content"], "<p>start</p>");
    let id = note["id"].as_i64().unwrap();

    let mut kept = 1;
    for (input, expected) in CORPUS {
        let (status, body) = call(
            app,
            "POST",
            &format!("{base}/{id}/messages"),
            t,
            Some(&json!({"content": input})),
        )
        .await;
        if expected.is_empty() {
            // Nothing readable is left: refused, nothing stored.
            let message = error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
            assert!(message.starts_with("content"), "{input}: {message}");
            continue;
        }
        assert_eq!(status, StatusCode::CREATED, "{input}: {body}");
        kept += 1;
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), kept);
        assert_eq!(messages.last().unwrap()["content"], *expected, "{input}");
    }

    // What is stored is what was shown: read back, every message is one of the outputs.
    let (_, read) = call(app, "GET", &format!("{base}/{id}"), t, None).await;
    let stored: Vec<&str> = read["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    let mut expected = vec!["<p>start</p>"];
    expected.extend(
        CORPUS
            .iter()
            .map(|(_, out)| *out)
            .filter(|out| !out.is_empty()),
    );
    assert_eq!(stored, expected);
    for html in stored {
        let lower = html.to_ascii_lowercase();
        for banned in [
            "<script",
            "javascript:",
            "onerror",
            "onload",
            "<svg",
            "<iframe",
            "style=",
        ] {
            assert!(!lower.contains(banned), "{banned} in {html}");
        }
    }
}

on_store_backends!(messages_are_sanitised_against_an_xss_corpus);
