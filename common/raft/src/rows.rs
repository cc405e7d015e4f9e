//! One typed row read for the state machines' tables, the same over the live database and
//! over a [`Txn`] of an applied batch (TiKV's `Peekable::get_msg_cf`): a row that does not
//! decode is an `InvalidData` error naming its table and key, never a panic and never a
//! silent default.

use std::io;

use rozone_kv::cf;
use rozone_kv::rocksdb::DB;
use serde::de::DeserializeOwned;

use crate::codec::decode;
use crate::txn::Txn;

/// A key as an error message shows it: text when it is printable, a big-endian number when
/// it is 8 bytes of something else, hex otherwise.
pub fn show_key(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) if !s.chars().any(char::is_control) => format!("{s:?}"),
        _ => match <[u8; 8]>::try_from(key) {
            Ok(b) => u64::from_be_bytes(b).to_string(),
            Err(_) => key.iter().map(|b| format!("{b:02x}")).collect(),
        },
    }
}

/// Decodes a stored row; a bad one is an error naming the table and the key.
pub fn decode_row<T: DeserializeOwned>(cf_name: &str, key: &[u8], bytes: &[u8]) -> io::Result<T> {
    decode(bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("corrupt row {} in {cf_name}: {e}", show_key(key)),
        )
    })
}

/// Point reads of rows.
pub trait Rows {
    /// The stored bytes of a row.
    fn get_bytes(&self, cf_name: &str, key: &[u8]) -> io::Result<Option<Vec<u8>>>;

    /// A row decoded as `T` (see [`decode_row`]).
    fn get_row<T: DeserializeOwned>(&self, cf_name: &str, key: &[u8]) -> io::Result<Option<T>> {
        self.get_bytes(cf_name, key)?
            .map(|b| decode_row(cf_name, key, &b))
            .transpose()
    }
}

impl Rows for DB {
    fn get_bytes(&self, cf_name: &str, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.get_cf(cf(self, cf_name)?, key)
            .map_err(io::Error::other)
    }
}

impl Rows for Txn<'_> {
    fn get_bytes(&self, cf_name: &str, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.get(cf_name, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_row_names_its_table_and_key_in_db_and_txn_alike() {
        let d = tempfile::tempdir().unwrap();
        let db = rozone_kv::open(d.path(), &["t"], &Default::default()).unwrap();
        db.put_cf(
            db.cf_handle("t").unwrap(),
            b"good",
            crate::codec::encode(&7u64).unwrap(),
        )
        .unwrap();
        db.put_cf(db.cf_handle("t").unwrap(), 9u64.to_be_bytes(), [0xff; 3])
            .unwrap();
        assert_eq!(db.get_row::<u64>("t", b"good").unwrap(), Some(7));
        assert_eq!(db.get_row::<u64>("t", b"none").unwrap(), None);
        let e = db.get_row::<u64>("t", &9u64.to_be_bytes()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().starts_with("corrupt row 9 in t:"), "{e}");
        let mut t = Txn::new(&db);
        t.put("t", b"x\x01".to_vec(), vec![0xff; 3]);
        let e = t.get_row::<u64>("t", b"x\x01").unwrap_err();
        assert!(e.to_string().starts_with("corrupt row 7801 in t:"), "{e}");
        assert_eq!(t.get_row::<u64>("t", b"good").unwrap(), Some(7));
    }
}
