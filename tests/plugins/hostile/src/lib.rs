//! A plugin whose handlers misbehave, one way each, beside a well-behaved one: the host must fail
//! only the misbehaving call and keep serving the others.

use canopy_sdk::prelude::*;

struct Hostile;

fn field(
    c: &mut canopy_sdk::CollectionCustomizer<'_>,
    name: &str,
    ty: ColumnType,
    f: impl Fn(&Rows, &Context) -> Result<Column> + 'static,
) {
    c.add_field(name, ComputedField::new(ty, ["id"], f));
}

impl Plugin for Hostile {
    fn customize(ds: &mut DataSource) -> Result<()> {
        let collection = ds
            .options()
            .get("collection")
            .and_then(Value::as_str)
            .unwrap_or("customers")
            .to_owned();
        let mut c = ds.collection(&collection);
        // Well-behaved: the id doubled.
        field(&mut c, "ok", ColumnType::NUMBER, |rows, _| {
            Ok(rows
                .numbers("id")?
                .iter()
                .map(|v| v.map(|n| n * 2.0))
                .collect::<Vec<_>>()
                .into())
        });
        field(&mut c, "loops", ColumnType::NUMBER, |_, _| {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        });
        field(&mut c, "bomb", ColumnType::NUMBER, |_, _| {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        });
        field(&mut c, "panics", ColumnType::NUMBER, |_, _| {
            panic!("the hostile plugin panicked on purpose")
        });
        // Malformed: booleans for a Number field.
        field(&mut c, "malformed", ColumnType::NUMBER, |rows, _| {
            Ok(vec![true; rows.len()].into())
        });
        // A guest error: the request's own 400.
        field(&mut c, "refuses", ColumnType::NUMBER, |_, _| {
            Err(Error::validation("refused by the plugin"))
        });
        Ok(())
    }
}

canopy_sdk::export_plugin!(Hostile);
