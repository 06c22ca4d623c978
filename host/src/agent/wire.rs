//! Values in their wire form, per column (§14.4, §8.12): bigints and decimals as strings where
//! the Node agent's drivers return strings, MariaDB decimals as numbers, binary columns as data
//! URIs with a sniffed MIME type and binary keys as hex. The column's [`Wire`] is decided when
//! the schema is built; here it only picks a branch, so serializing stays one match per value.

use std::borrow::Cow;
use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bigdecimal::ToPrimitive;
use serde::{Serialize, Serializer};
use serde_json::Value as Json;

use super::js;
use crate::datasource::schema::{ValidationRule, Wire};
use crate::datasource::{
    CollectionSchema, ColumnSchema, ColumnType, Operator, PrimitiveType, Record, Result, Value,
    decode_binary, pack_id_with,
};

/// The JSON of a value of a column with this wire form.
pub(crate) fn to_json(value: &Value, wire: Wire) -> serde_json::Result<Json> {
    serde_json::to_value(WireValue(value, wire))
}

/// A value with its column's wire form, written straight to the output by serde (documents are
/// not built as `serde_json::Value` trees first).
pub(crate) struct WireValue<'a>(pub &'a Value, pub Wire);

impl Serialize for WireValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Self(value, wire) = *self;
        match (value, wire) {
            (Value::Int(i), Wire::NumberString) => s.collect_str(i),
            (Value::Decimal(d), Wire::NumberString) => s.collect_str(&Plain(d)),
            (Value::Decimal(d), Wire::Number) => decimal_number(d).serialize(s),
            (Value::Binary(bytes), Wire::DataUri) => s.serialize_str(&data_uri(bytes)),
            (Value::Array(items), _) if wire != Wire::Plain => {
                s.collect_seq(items.iter().map(|item| WireValue(item, wire)))
            }
            (other, _) => other.serialize(s),
        }
    }
}

/// The text of a CSV cell for a scalar value whose wire form is not its own JSON form; `None`
/// when the plain rules of the CSV writer apply.
pub(crate) fn csv_text(value: &Value, wire: Wire) -> Option<String> {
    match (value, wire) {
        (Value::Decimal(d), Wire::Number) => Some(js::number(d.to_f64().unwrap_or(f64::NAN))),
        (Value::Binary(bytes), Wire::DataUri) => Some(data_uri(bytes)),
        _ => None,
    }
}

/// A decimal as the database prints it: all digits, the scale kept, zero included (`0.00`), and
/// never an exponent (`0.0000001`), where `BigDecimal`'s `Display` writes `0` and `1E-7`.
///
/// Digits that fit in an `i128` (any NUMERIC of up to 38 digits) are written by `itoa`, the
/// point placed by hand: `BigDecimal`'s own writer divides its big integer digit by digit, which
/// was a tenth of a CSV export's time. Others go through it.
pub(crate) struct Plain<'a>(pub &'a bigdecimal::BigDecimal);

impl std::fmt::Display for Plain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let zeros = |f: &mut std::fmt::Formatter<'_>, count: usize| {
            (0..count).try_for_each(|_| f.write_str("0"))
        };
        let (digits, scale) = self.0.as_bigint_and_scale();
        // Far exponents write that many zeros either way; only common ones are handled here.
        let (Some(n), true) = (digits.to_i128(), (-64..=64).contains(&scale)) else {
            return self.0.write_plain_string(f);
        };
        if n < 0 {
            f.write_str("-")?;
        }
        let mut buffer = itoa::Buffer::new();
        let text = buffer.format(n.unsigned_abs());
        let point = usize::try_from(scale).unwrap_or(0);
        if scale <= 0 {
            f.write_str(text)?;
            zeros(f, scale.unsigned_abs() as usize)
        } else if point < text.len() {
            let (whole, fraction) = text.split_at(text.len() - point);
            f.write_str(whole)?;
            f.write_str(".")?;
            f.write_str(fraction)
        } else {
            f.write_str("0.")?;
            zeros(f, point - text.len())?;
            f.write_str(text)
        }
    }
}

/// A decimal as the JavaScript number MariaDB's driver makes of it (`12.30` → `12.3`,
/// `5.00` → `5`): integral values are written without a fraction, as `JSON.stringify` does.
fn decimal_number(d: &bigdecimal::BigDecimal) -> Json {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    match d.to_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() <= EXACT => Json::from(f as i64),
        Some(f) => serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number),
        None => Json::Null,
    }
}

/// The packed id of a record as the Node agent packs it: `String(value)` of each key as its
/// driver returns it, so a MariaDB decimal key `12.30` is `12.3`, joined with `|`.
pub(crate) fn pack_id(collection: &CollectionSchema, record: &Record) -> Result<String> {
    pack_id_with(collection, record, |value, column, id| {
        push_id(value, column.wire, id)
    })
}

/// The id of a record a foreign key value points at (a to-one linkage), as [`pack_id`] writes it.
pub(crate) fn id_string(value: &Value, wire: Wire) -> String {
    let mut id = String::new();
    push_id(value, wire, &mut id);
    id
}

/// Appends `String(value)` of a key value in its wire form: numbers as JavaScript prints them
/// where the driver returns numbers (MariaDB decimals, floats), bigints and PostgreSQL/MySQL
/// decimals as their text (scale kept), bytes as hex. Written in place, without a string per
/// value.
fn push_id(value: &Value, wire: Wire, id: &mut String) {
    use std::fmt::Write as _;
    // Writing into a String cannot fail.
    let _ = match value {
        Value::String(s) => {
            id.push_str(s);
            Ok(())
        }
        Value::Int(i) => {
            id.push_str(itoa::Buffer::new().format(*i));
            Ok(())
        }
        Value::Decimal(d) if wire == Wire::Number => {
            id.push_str(&js::number(d.to_f64().unwrap_or(f64::NAN)));
            Ok(())
        }
        Value::Decimal(d) => write!(id, "{}", Plain(d)),
        Value::Float(f) => {
            id.push_str(&js::number(*f));
            Ok(())
        }
        Value::Uuid(u) => write!(id, "{u}"),
        Value::Binary(bytes) => {
            id.push_str(&hex::encode(bytes));
            Ok(())
        }
        other => {
            id.push_str(&other.to_id_string());
            Ok(())
        }
    };
}

/// Reads a binary value of a write body in its column's wire form: a data URI for ordinary
/// columns, hex for keys. `None` when the text is not in that form.
pub(crate) fn binary_from_wire(text: &str, wire: Wire) -> Option<Vec<u8>> {
    match wire {
        Wire::Hex => (!text.starts_with("data:")).then(|| decode_binary(text))?,
        _ => text
            .starts_with("data:")
            .then(|| decode_binary(text))
            .flatten(),
    }
}

/// `data:<sniffed mime>;base64,<bytes>`, as the binary decorator writes ordinary columns.
pub(crate) fn data_uri(bytes: &[u8]) -> String {
    let mime = sniff_mime(bytes);
    let mut out = String::with_capacity(13 + mime.len() + bytes.len().div_ceil(3) * 4);
    out.push_str("data:");
    out.push_str(mime);
    out.push_str(";base64,");
    // Node's `buffer.toString('base64')`: the standard alphabet, padded.
    STANDARD.encode_string(bytes, &mut out);
    out
}

// ----------------------------------------------------------------------------------------------
// The schema as the binary decorator serves it (§8.12)
//
// Neither JSON:API nor the frontend carry bytes, so the decorator (the last but renaming in the
// Node agent's stack) serves binary columns as strings and advertises the rules of their string
// form. Their filter operators are left as they are: the decorator passes them through.

/// `Binary` served as `String`; other primitives as they are.
pub(crate) fn served_primitive(primitive: PrimitiveType) -> PrimitiveType {
    match primitive {
        PrimitiveType::Binary => PrimitiveType::String,
        other => other,
    }
}

/// A column type as served: `Binary` is `String` at any depth (arrays, composite fields).
pub(crate) fn served_type(column_type: &ColumnType) -> ColumnType {
    match column_type {
        ColumnType::Primitive(p) => ColumnType::Primitive(served_primitive(*p)),
        ColumnType::Array(inner) => ColumnType::Array(Box::new(served_type(inner))),
        ColumnType::Composite(fields) => ColumnType::Composite(
            fields
                .iter()
                .map(|(name, ty)| (name.clone(), served_type(ty)))
                .collect(),
        ),
    }
}

/// The rules served for a binary column replace its own: its string form as a `Match` pattern
/// (a data URI, or lowercase hex for keys), for hex the byte lengths as character lengths
/// (`LongerThan n` → `2n + 1`, `ShorterThan n` → `2n - 1`, when `n` is not 0), then `Present`
/// when the column has it. Other columns (arrays of bytes too) keep their rules.
pub(crate) fn served_validation(column: &ColumnSchema) -> Cow<'_, [ValidationRule]> {
    if column.column_type != ColumnType::Primitive(PrimitiveType::Binary) {
        return Cow::Borrowed(&column.validation);
    }
    let rule = |operator, value: Option<Value>| ValidationRule { operator, value };
    // The pattern as the agent sends a `RegExp`: its `toString()`, slashes included.
    let pattern = |source: &str| Some(Value::String(source.to_owned()));
    let bound = |operator| {
        column
            .validation
            .iter()
            .find(|r| r.operator == operator)
            .and_then(|r| r.value.as_ref())
            .and_then(Value::as_f64)
            .filter(|n| *n != 0.0 && !n.is_nan())
    };
    let mut rules = Vec::with_capacity(4);
    if column.wire == Wire::Hex {
        rules.push(rule(Operator::Match, pattern("/^[0-9a-f]+$/")));
        if let Some(min) = bound(Operator::LongerThan) {
            rules.push(rule(
                Operator::LongerThan,
                Some(js_integer(min * 2.0 + 1.0)),
            ));
        }
        if let Some(max) = bound(Operator::ShorterThan) {
            rules.push(rule(
                Operator::ShorterThan,
                Some(js_integer(max * 2.0 - 1.0)),
            ));
        }
    } else {
        rules.push(rule(Operator::Match, pattern("/^data:.*;base64,.*/")));
    }
    if column.is_required() {
        rules.push(rule(Operator::Present, None));
    }
    Cow::Owned(rules)
}

/// A JavaScript number as a value: integral ones as integers (they print without `.0`).
fn js_integer(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        Value::Int(n as i64)
    } else {
        Value::Float(n)
    }
}

// ----------------------------------------------------------------------------------------------
// MIME sniffing (§8.12)
//
// The binary decorator names the type with the first MIME type `magic-bytes.js` guesses, or
// `application/octet-stream`. That library walks a byte trie built from file signatures: the
// signatures at an offset are tried first (in the order they were declared), then those at the
// start; along the walk an exact byte is preferred to a `?` wildcard and the deepest node with
// guesses wins, even when its guesses carry no MIME type (then the answer is octet-stream).
// The signatures below are those whose guess carries a MIME type, plus the few without one that
// end deeper than one with (and so hide it), in the library's order.

/// `None` is a wildcard byte.
type Pattern = &'static [Option<u8>];

/// A file signature: where it starts, its bytes, and the MIME type it names (if any).
struct Signature {
    offset: usize,
    bytes: Pattern,
    mime: Option<&'static str>,
}

macro_rules! sig {
    (@b ?) => { None };
    (@b $b:literal) => { Some($b) };
    ($offset:literal, [$($b:tt)*], $mime:expr) => {
        Signature { offset: $offset, bytes: &[$(sig!(@b $b)),*], mime: $mime }
    };
}

/// In declaration order: which guess comes first at a node decides the MIME type.
static SIGNATURES: &[Signature] = &[
    sig!(0, [0x47 0x49 0x46 0x38 0x37 0x61], Some("image/gif")),
    sig!(0, [0x47 0x49 0x46 0x38 0x39 0x61], Some("image/gif")),
    sig!(0, [0xFF 0xD8 0xFF], Some("image/jpeg")),
    sig!(0, [0x52 0x49 0x46 0x46 ? ? ? ? 0x57 0x45 0x42 0x50], Some("image/webp")),
    sig!(4, [0x66 0x74 0x79 0x70 0x6D 0x69 0x66 0x31], Some("image/heif")),
    sig!(4, [0x66 0x74 0x79 0x70 0x68 0x65 0x69 0x63], Some("image/heif")),
    sig!(0, [0x53 0x50 0x30 0x31], Some("application/octet-stream")),
    sig!(4, [0x66 0x74 0x79 0x70], Some("video/mp4")),
    sig!(0, [0x00 0x01 0x00 0x00 0x00], Some("font/ttf")),
    sig!(0, [0x4F 0x54 0x54 0x4F], Some("font/otf")),
    sig!(0, [0x50 0x4C], Some("application/vnd.ms-fontobject")),
    sig!(0, [0x77 0x4F 0x46 0x46], Some("font/woff")),
    sig!(0, [0x77 0x4F 0x46 0x32], Some("font/woff2")),
    sig!(0, [0x00 0x00 0x01 0x00], Some("image/x-icon")),
    sig!(0, [0x42 0x5A 0x68], Some("application/x-bzip2")),
    sig!(0, [0x49 0x49 0x2A 0x00], Some("image/tiff")),
    sig!(0, [0x4D 0x4D 0x00 0x2A], Some("image/tiff")),
    // Canon raw: a TIFF header followed by `CR`, guessed without a MIME type.
    sig!(0, [0x49 0x49 0x2A 0x00 0x10 0x00 0x00 0x00 0x43 0x52], None),
    sig!(0, [0x46 0x4F 0x52 0x4D ? ? ? ? 0x41 0x49 0x46 0x46], Some("audio/x-aiff")),
    sig!(0, [0x50 0x4B 0x03 0x04], Some("application/zip")),
    sig!(0, [0x50 0x4B 0x05 0x06], Some("application/zip")),
    sig!(0, [0x50 0x4B 0x07 0x08], Some("application/zip")),
    sig!(0, [0x52 0x61 0x72 0x21 0x1A 0x07 0x00], Some("application/vnd.rar")),
    sig!(0, [0x52 0x61 0x72 0x21 0x1A 0x07 0x01 0x00], Some("application/vnd.rar")),
    // Declared as RAR before ELF, so ELF binaries are guessed as RAR archives.
    sig!(0, [0x7F 0x45 0x4C 0x46], Some("application/vnd.rar")),
    sig!(0, [0x89 0x50 0x4E 0x47 0x0D 0x0A 0x1A 0x0A], Some("image/png")),
    // Mach-O at 0x1000: guessed without a MIME type (and tried before the start of the file).
    sig!(0x1000, [0xFE 0xED 0xFA 0xCE], None),
    sig!(0x1000, [0xFE 0xED 0xFA 0xCF], None),
    sig!(0, [0x25 0x21 0x50 0x53], Some("application/postscript")),
    sig!(0, [0x25 0x50 0x44 0x46], Some("application/pdf")),
    sig!(0, [0x4F 0x67 0x67 0x53 ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? 0x80 0x74 0x68 0x65 0x6F 0x72 0x61], Some("video/ogg")),
    sig!(0, [0x4F 0x67 0x67 0x53 ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? 0x01 0x76 0x69 0x64 0x65 0x6F 0x00], Some("video/ogg")),
    sig!(0, [0x4F 0x67 0x67 0x53 ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? 0x7F 0x46 0x4C 0x41 0x43], Some("audio/ogg")),
    sig!(0, [0x4F 0x67 0x67 0x53 ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? 0x53 0x70 0x65 0x65 0x78 0x20 0x20], Some("audio/ogg")),
    sig!(0, [0x4F 0x67 0x67 0x53 ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? ? 0x01 0x76 0x6F 0x72 0x62 0x69 0x73], Some("audio/ogg")),
    sig!(0, [0x4F 0x67 0x67 0x53], Some("application/ogg")),
    sig!(0, [0x38 0x42 0x50 0x53], Some("application/x-photoshop")),
    sig!(0, [0x52 0x49 0x46 0x46 ? ? ? ? 0x57 0x41 0x56 0x45], Some("audio/x-wav")),
    sig!(0, [0x52 0x49 0x46 0x46 ? ? ? ? 0x41 0x56 0x49 0x20], Some("video/x-msvideo")),
    sig!(0, [0xFF 0xFB], Some("audio/mpeg")),
    sig!(0, [0xFF 0xF3], Some("audio/mpeg")),
    sig!(0, [0xFF 0xF2], Some("audio/mpeg")),
    sig!(0, [0x49 0x44 0x33], Some("audio/mpeg")),
    sig!(0, [0x42 0x4D], Some("image/bmp")),
    sig!(0, [0x4D 0x54 0x68 0x64], Some("audio/midi")),
    sig!(0, [0xD0 0xCF 0x11 0xE0 0xA1 0xB1 0x1A 0xE1], Some("application/msword")),
    sig!(0x101, [0x75 0x73 0x74 0x61 0x72 0x00 0x30 0x30], Some("application/x-tar")),
    sig!(0x101, [0x75 0x73 0x74 0x61 0x72 0x20 0x20 0x00], Some("application/x-tar")),
    sig!(0, [0x37 0x7A 0xBC 0xAF 0x27 0x1C], Some("application/x-7z-compressed")),
    sig!(0, [0x1F 0x8B], Some("application/gzip")),
    sig!(0, [0xFD 0x37 0x7A 0x58 0x5A 0x00 0x00], Some("application/gzip")),
    sig!(0, [0x1A 0x45 0xDF 0xA3], Some("video/x-matroska")),
    // DICOM at 0x80: guessed without a MIME type.
    sig!(0x80, [0x44 0x49 0x43 0x4D], None),
    sig!(0, [0x3C 0x3F 0x78 0x6D 0x6C 0x20], Some("application/xml")),
    sig!(0, [0x00 0x61 0x73 0x6D], Some("application/wasm")),
    sig!(0, [0x43 0x57 0x53], Some("application/x-shockwave-flash")),
    sig!(0, [0x46 0x57 0x53], Some("application/x-shockwave-flash")),
    sig!(0, [0x7B 0x5C 0x72 0x74 0x66 0x31], Some("application/rtf")),
    sig!(0, [0x00 0x00 0x01 0xBA], Some("video/mpeg")),
    // An MPEG transport stream starts with the sync byte `G`: any such file is guessed so.
    sig!(0, [0x47], Some("video/mpeg")),
    sig!(0, [0x00 0x00 0x01 0xB3], Some("video/mpeg")),
    sig!(4, [0x66 0x72 0x65 0x65], Some("video/quicktime")),
    sig!(4, [0x6D 0x64 0x61 0x74], Some("video/quicktime")),
    sig!(4, [0x6D 0x6F 0x6F 0x76], Some("video/quicktime")),
    sig!(4, [0x77 0x69 0x64 0x65], Some("video/quicktime")),
    sig!(4, [0x66 0x74 0x79 0x70 0x71 0x74], Some("video/quicktime")),
    sig!(0, [0xEF 0xBB 0xBF], Some("text/plain; charset=UTF-8")),
    sig!(0, [0xFF 0xFE], Some("text/plain; charset=UTF-16LE")),
    sig!(0, [0xFE 0xFF], Some("text/plain; charset=UTF-16BE")),
    sig!(0, [0xFF 0xFE 0x00 0x00], Some("text/plain; charset=UTF-32LE")),
    sig!(0, [0x00 0x00 0xFE 0xFF], Some("text/plain; charset=UTF-32BE")),
    sig!(0, [0x31 0x0D 0x0A 0x30 0x30 0x3A], Some("application/x-subrip")),
    sig!(0, [0xEF 0xBB 0xBF 0x57 0x45 0x42 0x56 0x54 0x54 0x0A], Some("text/vtt")),
    sig!(0, [0xEF 0xBB 0xBF 0x57 0x45 0x42 0x56 0x54 0x54 0x0D], Some("text/vtt")),
    sig!(0, [0xEF 0xBB 0xBF 0x57 0x45 0x42 0x56 0x54 0x54 0x20], Some("text/vtt")),
    sig!(0, [0xEF 0xBB 0xBF 0x57 0x45 0x42 0x56 0x54 0x54 0x09], Some("text/vtt")),
    sig!(0, [0x57 0x45 0x42 0x56 0x54 0x54 0x0A], Some("text/vtt")),
    sig!(0, [0x57 0x45 0x42 0x56 0x54 0x54 0x0D], Some("text/vtt")),
    sig!(0, [0x57 0x45 0x42 0x56 0x54 0x54 0x20], Some("text/vtt")),
    sig!(0, [0x57 0x45 0x42 0x56 0x54 0x54 0x09], Some("text/vtt")),
    // Any document starting with `{` or `[` is guessed as JSON.
    sig!(0, [0x7B], Some("application/json")),
    sig!(0, [0x5B], Some("application/json")),
    sig!(0, [0xFE 0xED 0xFA 0xCF], Some("application/x-executable")),
    sig!(0, [0x52 0x65 0x63 0x65 0x69 0x76 0x65 0x64 0x3A], Some("message/rfc822")),
    sig!(0, [0x3C 0x73 0x76 0x67], Some("image/svg+xml")),
];

/// One trie node: children by byte (`None`: the wildcard), and the guesses ending here.
#[derive(Default)]
struct Node {
    children: Vec<(Option<u8>, usize)>,
    /// Whether some signature ends here, and the first MIME type among them.
    guessed: bool,
    mime: Option<&'static str>,
}

/// Tries per offset (in first-declared order, offset 0 last) over an arena of nodes.
struct Tries {
    nodes: Vec<Node>,
    /// `(offset, root)`; the start-of-file trie is tried after every offset trie.
    roots: Vec<(usize, usize)>,
}

impl Tries {
    fn build() -> Self {
        let mut tries = Self {
            nodes: Vec::new(),
            roots: Vec::new(),
        };
        for signature in SIGNATURES {
            let mut node = tries.root(signature.offset);
            for byte in signature.bytes {
                node = tries.child(node, *byte);
            }
            let end = &mut tries.nodes[node];
            end.guessed = true;
            end.mime = end.mime.or(signature.mime);
        }
        // The start of the file last.
        if let Some(i) = tries.roots.iter().position(|(offset, _)| *offset == 0) {
            let start = tries.roots.remove(i);
            tries.roots.push(start);
        }
        tries
    }

    fn root(&mut self, offset: usize) -> usize {
        if let Some((_, root)) = self.roots.iter().find(|(o, _)| *o == offset) {
            return *root;
        }
        self.nodes.push(Node::default());
        let root = self.nodes.len() - 1;
        self.roots.push((offset, root));
        root
    }

    fn child(&mut self, node: usize, byte: Option<u8>) -> usize {
        if let Some((_, child)) = self.nodes[node].children.iter().find(|(b, _)| *b == byte) {
            return *child;
        }
        self.nodes.push(Node::default());
        let child = self.nodes.len() - 1;
        self.nodes[node].children.push((byte, child));
        child
    }

    fn step(&self, node: usize, byte: Option<u8>) -> Option<usize> {
        let children = &self.nodes[node].children;
        let exact = byte.and_then(|b| children.iter().find(|(c, _)| *c == Some(b)));
        exact
            .or_else(|| children.iter().find(|(c, _)| c.is_none()))
            .map(|(_, child)| *child)
    }

    /// The deepest guess along the walk from `start`: `Some(mime)` when something was guessed.
    fn walk(&self, root: usize, bytes: &[u8], start: usize) -> Option<Option<&'static str>> {
        let mut node = root;
        let mut guess = None;
        // Past the end the library still follows wildcards; the walk ends with the trie.
        for index in start.. {
            match self.step(node, bytes.get(index).copied()) {
                Some(next) => node = next,
                None => break,
            }
            if self.nodes[node].guessed {
                guess = Some(self.nodes[node].mime);
            }
        }
        guess
    }

    fn sniff(&self, bytes: &[u8]) -> Option<&'static str> {
        for (offset, root) in &self.roots {
            if *offset != 0 && *offset >= bytes.len() {
                continue;
            }
            if let Some(mime) = self.walk(*root, bytes, *offset) {
                return mime;
            }
        }
        None
    }
}

static TRIES: LazyLock<Tries> = LazyLock::new(Tries::build);

/// The MIME type the binary decorator names for these bytes.
pub(crate) fn sniff_mime(bytes: &[u8]) -> &'static str {
    TRIES.sniff(bytes).unwrap_or("application/octet-stream")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_plainly_by_hand_as_bigdecimal_writes_them() {
        for text in [
            "0",
            "0.00",
            "-0.50",
            "12.30",
            "-12.30",
            "5",
            "1e3",
            "-1e3",
            "1e-7",
            "-1e-7",
            "123456789.123456789",
            "0.000001234",
            "99999999999999999999999999999999999999",
            "-170141183460469231731687303715884105728",
            "1e64",
            "1e-64",
            "1e65",
            "1e-65",
            "12345678901234567890123456789012345678901234567890.5",
        ] {
            let d: bigdecimal::BigDecimal = text.parse().unwrap();
            assert_eq!(Plain(&d).to_string(), d.to_plain_string(), "{text}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_decimal_is_written_as_bigdecimal_writes_it(digits: i128, scale in -70i64..70) {
            let d = bigdecimal::BigDecimal::new(digits.into(), scale);
            proptest::prop_assert_eq!(Plain(&d).to_string(), d.to_plain_string());
        }
    }

    #[test]
    fn mime_types_are_sniffed_from_signatures() {
        let png = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0];
        assert_eq!(sniff_mime(&png), "image/png");
        assert_eq!(sniff_mime(b"GIF89a..."), "image/gif");
        assert_eq!(sniff_mime(&[0xFF, 0xD8, 0xFF, 0xE0]), "image/jpeg");
        assert_eq!(sniff_mime(b"%PDF-1.7"), "application/pdf");
        assert_eq!(sniff_mime(b"PK\x03\x04rest"), "application/zip");
        assert_eq!(sniff_mime(b"RIFF\x10\0\0\0WEBPVP8 "), "image/webp");
        assert_eq!(sniff_mime(b"RIFF\x10\0\0\0WAVEfmt "), "audio/x-wav");
        assert_eq!(sniff_mime(b"\0\0\0\x18ftypmp42"), "video/mp4");
        assert_eq!(sniff_mime(b"\0\0\0\x18ftypheic"), "image/heif");
        assert_eq!(sniff_mime(b"\0\0\0\x14ftypqt  "), "video/quicktime");
        assert_eq!(sniff_mime(b"\x1f\x8b\x08"), "application/gzip");
        assert_eq!(
            sniff_mime(b"\xEF\xBB\xBFhello"),
            "text/plain; charset=UTF-8"
        );
        assert_eq!(sniff_mime(b"\xEF\xBB\xBFWEBVTT\n"), "text/vtt");
        assert_eq!(sniff_mime(b"<svg xmlns"), "image/svg+xml");
    }

    #[test]
    fn sniffing_keeps_the_library_quirks() {
        // Plain text has no signature, but a leading `{`, `[` or `G` does.
        assert_eq!(sniff_mime(b"hello"), "application/octet-stream");
        assert_eq!(sniff_mime(b"{\"a\":1}"), "application/json");
        assert_eq!(sniff_mime(b"[1]"), "application/json");
        assert_eq!(sniff_mime(b"Good morning"), "video/mpeg");
        assert_eq!(sniff_mime(b"{\\rtf1"), "application/rtf");
        // ELF is declared as RAR first; a Canon raw hides the TIFF guess without naming a type.
        assert_eq!(sniff_mime(b"\x7fELF\x02"), "application/vnd.rar");
        assert_eq!(
            sniff_mime(b"II*\0\x10\0\0\0CR\x02"),
            "application/octet-stream"
        );
        assert_eq!(sniff_mime(b"II*\0\x08\0\0\0"), "image/tiff");
        // Empty and unknown bytes.
        assert_eq!(sniff_mime(b""), "application/octet-stream");
        assert_eq!(
            sniff_mime(&[0xDE, 0xAD, 0xBE, 0xEF]),
            "application/octet-stream"
        );
        // Offset signatures are tried first: `ftyp` at 4 wins over a JSON-looking start.
        assert_eq!(sniff_mime(b"{\0\0\0ftyp"), "video/mp4");
        // A tar header at 0x101.
        let mut tar = vec![0u8; 512];
        tar[0x101..0x109].copy_from_slice(b"ustar\x0000");
        assert_eq!(sniff_mime(&tar), "application/x-tar");
        // DICOM at 0x80 is guessed without a type, hiding what the start would say.
        let mut dicom = vec![b'{'; 0x84];
        dicom[0x80..].copy_from_slice(b"DICM");
        assert_eq!(sniff_mime(&dicom), "application/octet-stream");
    }

    #[test]
    fn data_uris_encode_base64_with_padding() {
        assert_eq!(data_uri(b""), "data:application/octet-stream;base64,");
        assert_eq!(data_uri(b"hi"), "data:application/octet-stream;base64,aGk=");
        assert_eq!(
            data_uri(b"hey"),
            "data:application/octet-stream;base64,aGV5"
        );
        assert_eq!(
            data_uri(b"hell"),
            "data:application/octet-stream;base64,aGVsbA=="
        );
        assert_eq!(data_uri(b"{}"), "data:application/json;base64,e30=");
        // Every byte value survives the round trip.
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode_binary(&data_uri(&all)), Some(all));
    }

    #[test]
    fn data_uris_are_read_leniently() {
        let read = |payload: &str| decode_binary(&format!("data:text/plain;base64,{payload}"));
        assert_eq!(read("aGk="), Some(b"hi".to_vec()));
        // Missing or extra padding, whitespace, a dangling symbol and non-zero trailing bits.
        assert_eq!(read("aGk"), Some(b"hi".to_vec()));
        assert_eq!(read("aG\nk=="), Some(b"hi".to_vec()));
        assert_eq!(read("aGVsbA"), Some(b"hell".to_vec()));
        assert_eq!(read("aGV5Q"), Some(b"hey".to_vec()));
        assert_eq!(read("aGl="), Some(b"hi".to_vec()));
        assert_eq!(read(""), Some(Vec::new()));
        // Characters outside the standard alphabet.
        assert_eq!(read("aG!k"), None);
        assert_eq!(read("aGV5!"), None);
        assert_eq!(read("aGk_"), None);
    }

    #[test]
    fn values_take_their_column_wire_form() {
        let json = |v: &Value, w: Wire| to_json(v, w).unwrap();
        const BIG_TEXT: &str = "9007199254740993";
        let big = Value::Int(9_007_199_254_740_993);
        assert_eq!(
            json(&big, Wire::NumberString),
            Json::from("9007199254740993")
        );
        assert_eq!(
            json(&big, Wire::Plain),
            serde_json::json!(9_007_199_254_740_993_i64)
        );
        let price = Value::Decimal("12.30".parse().unwrap());
        assert_eq!(json(&price, Wire::NumberString), Json::from("12.30"));
        assert_eq!(json(&price, Wire::Number), serde_json::json!(12.3));
        let whole = Value::Decimal("5.00".parse().unwrap());
        assert_eq!(to_json(&whole, Wire::Number).unwrap().to_string(), "5");
        assert_eq!(
            to_json(&whole, Wire::NumberString).unwrap(),
            Json::from("5.00")
        );
        assert_eq!(csv_text(&price, Wire::Number).as_deref(), Some("12.3"));
        assert_eq!(csv_text(&price, Wire::NumberString), None);
        // Zero keeps its scale and small values their digits, as the database prints them.
        for text in ["0.00", "0.0000001", "-0.000012", "10000"] {
            let value = Value::Decimal(text.parse().unwrap());
            assert_eq!(json(&value, Wire::NumberString), Json::from(text));
            assert_eq!(id_string(&value, Wire::NumberString), text);
        }
        assert_eq!(id_string(&price, Wire::Number), "12.3");
        assert_eq!(id_string(&whole, Wire::Number), "5");
        assert_eq!(id_string(&Value::Float(2.0), Wire::Plain), "2");
        assert_eq!(
            id_string(&Value::Binary(vec![0xCA, 0xFE]), Wire::Hex),
            "cafe"
        );
        assert_eq!(id_string(&big, Wire::NumberString), BIG_TEXT);
        let bytes = Value::Binary(vec![0xCA, 0xFE]);
        assert_eq!(json(&bytes, Wire::Hex), Json::from("cafe"));
        assert_eq!(
            json(&bytes, Wire::DataUri),
            Json::from("data:application/octet-stream;base64,yv4=")
        );
        let ids = Value::Array(vec![Value::Int(1), Value::Null]);
        assert_eq!(
            json(&ids, Wire::NumberString),
            serde_json::json!(["1", null])
        );
        assert_eq!(json(&Value::Null, Wire::NumberString), Json::Null);
    }

    #[test]
    fn binary_writes_take_the_column_form() {
        assert_eq!(
            binary_from_wire("data:text/plain;base64,aGk=", Wire::DataUri),
            Some(b"hi".to_vec())
        );
        assert_eq!(binary_from_wire("6869", Wire::DataUri), None);
        assert_eq!(binary_from_wire("6869", Wire::Hex), Some(b"hi".to_vec()));
        assert_eq!(
            binary_from_wire("data:text/plain;base64,aGk=", Wire::Hex),
            None
        );
        assert_eq!(binary_from_wire("zz", Wire::Hex), None);
    }
}
