//! Writes a JSON:API [`Document`] straight into its output buffer.
//!
//! The document's own keys (`data`, `type`, `attributes`, `links`, …) are literal bytes, and
//! names, ids and hrefs that hold nothing to escape (nearly all of them) are copied whole. Only
//! attribute values go through serde_json. Written with serde's map serializer instead, every
//! key was escaped byte by byte: a list of 15 rows wrote some 500 strings that way, 11% of the
//! request's instructions (issue 23's profile).

use std::fmt::Display;

use percent_encoding::utf8_percent_encode;
use serde::Serialize;

use super::{Data, Document, Linkage, Resource, URI_COMPONENT, internal};
use crate::agent::Result;
use crate::agent::wire::WireValue;

impl Document<'_> {
    /// Appends the document: `data`, `included` when some to-one relation was loaded, `jsonapi`,
    /// and `meta.decorators` on searches, in the agent's order.
    pub(super) fn write(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(b"{\"data\":");
        match &self.data {
            Data::None => out.extend_from_slice(b"null"),
            Data::One(resource) => resource.write(out)?,
            Data::Many(resources) => array(out, resources.iter(), |out, r| r.write(out))?,
        }
        // The agent's serializer omits `included` when it is empty (no loaded, non-null to-one).
        if !self.included.is_empty() {
            out.extend_from_slice(b",\"included\":");
            array(out, self.included.values(), |out, r| r.write(out))?;
        }
        out.extend_from_slice(b",\"jsonapi\":{\"version\":\"1.0\"}");
        if let Some(decorators) = &self.decorators {
            out.extend_from_slice(b",\"meta\":{\"decorators\":");
            value(out, decorators)?;
            out.push(b'}');
        }
        out.push(b'}');
        Ok(())
    }
}

impl Resource<'_> {
    /// `{"type", "id", "attributes", "relationships"}`; `relationships` only when there are some.
    fn write(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(b"{\"type\":");
        string(out, &self.collection.name)?;
        out.extend_from_slice(b",\"id\":");
        string(out, &self.id)?;
        out.extend_from_slice(b",\"attributes\":{");
        for (index, (name, attribute, wire)) in self.attributes().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            string(out, name)?;
            out.push(b':');
            value(out, &WireValue(attribute, wire))?;
        }
        out.push(b'}');
        if !self.relationships.is_empty() {
            out.extend_from_slice(b",\"relationships\":{");
            for (index, (name, linkage)) in self.relationships.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                string(out, name)?;
                out.push(b':');
                self.write_linkage(out, name, linkage)?;
            }
            out.push(b'}');
        }
        out.push(b'}');
        Ok(())
    }

    /// A to-many relation's link (`/forest/{collection}/{id}/relationships/{name}`, the id
    /// escaped as `encodeURIComponent` does), or a to-one's identifier or null.
    fn write_linkage(&self, out: &mut Vec<u8>, name: &str, linkage: &Linkage<'_>) -> Result<()> {
        match linkage {
            Linkage::Related => {
                out.extend_from_slice(b"{\"links\":{\"related\":{\"href\":\"/forest/");
                contents(out, &self.collection.name)?;
                out.push(b'/');
                // Percent-encoded text is ASCII letters, digits, `%` and `-_.!~*'()`: nothing
                // that JSON escapes.
                for chunk in utf8_percent_encode(&self.id, URI_COMPONENT) {
                    out.extend_from_slice(chunk.as_bytes());
                }
                out.extend_from_slice(b"/relationships/");
                contents(out, name)?;
                out.extend_from_slice(b"\"}}}");
            }
            Linkage::Null => out.extend_from_slice(b"{\"data\":null}"),
            Linkage::To(r#type, id) => {
                out.extend_from_slice(b"{\"data\":{\"type\":");
                string(out, r#type)?;
                out.extend_from_slice(b",\"id\":");
                string(out, id)?;
                out.extend_from_slice(b"}}");
            }
        }
        Ok(())
    }
}

/// `[a,b,…]`, each item written by `each`.
fn array<T>(
    out: &mut Vec<u8>,
    items: impl Iterator<Item = T>,
    mut each: impl FnMut(&mut Vec<u8>, T) -> Result<()>,
) -> Result<()> {
    out.push(b'[');
    for (index, item) in items.enumerate() {
        if index > 0 {
            out.push(b',');
        }
        each(out, item)?;
    }
    out.push(b']');
    Ok(())
}

/// Any value, as serde_json writes it.
fn value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<()> {
    serde_json::to_writer(&mut *out, value).map_err(failed)
}

/// A JSON string.
fn string(out: &mut Vec<u8>, text: &str) -> Result<()> {
    out.push(b'"');
    contents(out, text)?;
    out.push(b'"');
    Ok(())
}

/// The inside of a JSON string: copied whole when no byte needs escaping, else escaped by
/// serde_json (so both paths write what serde_json writes).
fn contents(out: &mut Vec<u8>, text: &str) -> Result<()> {
    if !needs_escape(text.as_bytes()) {
        out.extend_from_slice(text.as_bytes());
        return Ok(());
    }
    let quoted = serde_json::to_vec(text).map_err(failed)?;
    if let [b'"', inner @ .., b'"'] = quoted.as_slice() {
        out.extend_from_slice(inner);
    }
    Ok(())
}

/// Whether `bytes` hold a `"`, a `\` or a control character (below 0x20), which JSON escapes.
/// Eight bytes at a time: for a word `v`, `(v - n·0x01…01) & !v & 0x80…80` is non-zero exactly
/// when some byte of `v` is below `n` (n ≤ 0x80), and a byte equal to `c` is a zero byte of
/// `v ^ c·0x01…01`. A byte-by-byte test cost 5% of a list request; this one a quarter of it.
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v & HIGHS != 0;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let v = u64::from_ne_bytes(word);
        if below(v, 0x20)
            || below(v ^ (ONES * u64::from(b'"')), 1)
            || below(v ^ (ONES * u64::from(b'\\')), 1)
        {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

fn failed(error: impl Display) -> crate::agent::Error {
    internal(format!("document serialization: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(text: &str) -> String {
        let mut out = Vec::new();
        string(&mut out, text).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_are_found_in_every_position_of_a_word() {
        for special in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
            for len in 1..=20 {
                for at in 0..len {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = special;
                    assert!(needs_escape(&bytes), "{special:#x} at {at} of {len}");
                }
            }
        }
        // Nothing to escape: every other ASCII byte, and bytes of multi-byte characters.
        let plain: Vec<u8> = (0x20..=0xff_u8)
            .filter(|b| *b != b'"' && *b != b'\\')
            .collect();
        assert!(!needs_escape(&plain));
        assert!(!needs_escape(
            "é ünïcode 🌳 and more than eight bytes".as_bytes()
        ));
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for text in [
            "",
            "orders",
            "a \"quoted\" name",
            "back\\slash",
            "line\nbreak\ttab\u{1}",
            "é ünïcode 🌳",
            "</script>",
        ] {
            assert_eq!(
                written(text),
                serde_json::to_string(text).unwrap(),
                "{text:?}"
            );
        }
    }
}
