//! What the log and the snapshot hold: object versions and deletions, each naming its table.
//!
//! A log record is one transaction's changes (entries back to back); a snapshot is a header record
//! (revision, object count) followed by one record per object.

use super::frame::{Malformed, Reader, Writer};
use crate::object::Key;

const PUT: u8 = 1;
const DELETE: u8 = 2;

/// One change as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The revision of the change (a put's object carries it as its resourceVersion).
    pub(crate) rv: u64,
    /// The table's stable name (see `persist::table_name`).
    pub(crate) table: String,
    pub(crate) key: Key,
    /// The object as stored; `None` for a deletion.
    pub(crate) raw: Option<Vec<u8>>,
}

/// One change to write, borrowing the stored object.
pub(crate) struct EntryRef<'a> {
    pub(crate) rv: u64,
    pub(crate) table: &'a str,
    pub(crate) key: &'a Key,
    pub(crate) raw: Option<&'a [u8]>,
}

pub(crate) fn encode(entry: &EntryRef<'_>, w: &mut Writer) {
    w.u8(if entry.raw.is_some() { PUT } else { DELETE });
    w.u64(entry.rv);
    w.bytes(entry.table.as_bytes());
    w.bytes(entry.key.0.as_bytes());
    w.bytes(entry.key.1.as_bytes());
    if let Some(raw) = entry.raw {
        w.bytes(raw);
    }
}

fn decode(r: &mut Reader<'_>) -> Result<Entry, Malformed> {
    let op = r.u8()?;
    if op != PUT && op != DELETE {
        return Err(Malformed("an unknown change type"));
    }
    let rv = r.u64()?;
    let table = r.string()?;
    let key = (r.string()?, r.string()?);
    let raw = (op == PUT).then(|| r.bytes().map(<[u8]>::to_vec)).transpose()?;
    Ok(Entry { rv, table, key, raw })
}

/// A log record's entries: at least one, in commit order.
pub(crate) fn decode_batch(payload: &[u8]) -> Result<Vec<Entry>, Malformed> {
    let mut r = Reader(payload);
    let mut entries = Vec::new();
    while !r.is_empty() {
        entries.push(decode(&mut r)?);
    }
    if entries.is_empty() {
        return Err(Malformed("an empty transaction"));
    }
    Ok(entries)
}

/// One snapshot object record: exactly one put.
pub(crate) fn decode_object(payload: &[u8]) -> Result<Entry, Malformed> {
    let mut r = Reader(payload);
    let entry = decode(&mut r)?;
    if entry.raw.is_none() || !r.is_empty() {
        return Err(Malformed("a snapshot record that is not one object"));
    }
    Ok(entry)
}

/// The snapshot's first record.
pub(crate) fn encode_header(rv: u64, objects: u64) -> Vec<u8> {
    let mut w = Writer::default();
    w.u64(rv);
    w.u64(objects);
    w.0
}

pub(crate) fn decode_header(payload: &[u8]) -> Result<(u64, u64), Malformed> {
    let mut r = Reader(payload);
    let header = (r.u64()?, r.u64()?);
    if !r.is_empty() {
        return Err(Malformed("a snapshot header with trailing bytes"));
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let key = ("ns".to_string(), "a".to_string());
        let put = EntryRef {
            rv: 7,
            table: "v1/configmaps",
            key: &key,
            raw: Some(br#"{"kind":"ConfigMap"}"#),
        };
        let del = EntryRef {
            rv: 8,
            table: "v1/configmaps",
            key: &key,
            raw: None,
        };
        let mut w = Writer::default();
        encode(&put, &mut w);
        encode(&del, &mut w);
        let got = decode_batch(&w.0).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (
                got[0].rv,
                got[0].table.as_str(),
                &got[0].key,
                got[0].raw.as_deref()
            ),
            (7, "v1/configmaps", &key, Some(&br#"{"kind":"ConfigMap"}"#[..]))
        );
        assert_eq!((got[1].rv, got[1].raw.as_deref()), (8, None));
        assert!(decode_object(&w.0).is_err(), "two entries are not one object");
        assert!(decode_batch(&[]).is_err());
        assert!(decode_batch(&[9]).is_err());
        assert_eq!(decode_header(&encode_header(3, 4)), Ok((3, 4)));
    }
}
