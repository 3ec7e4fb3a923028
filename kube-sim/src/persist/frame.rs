//! Length- and checksum-framed records (the unit a crash can tear, and what replay checks), and the
//! bounds-checked byte encoding of their payloads.
//!
//! A frame is `len: u32 LE`, `checksum: [u8; 8]`, then `len` payload bytes. The checksum is the first
//! eight bytes of the payload's SHA-256: a hash the crate already depends on, and a simulator's log is
//! not where checksum speed matters.

use sha2::{Digest, Sha256};

/// Largest payload written or read. A length field above it is a torn or corrupt frame, never an
/// allocation.
pub(crate) const MAX_RECORD: usize = 64 << 20;

const HEADER: usize = 4 + 8;

fn checksum(payload: &[u8]) -> [u8; 8] {
    let digest = Sha256::digest(payload);
    let mut out = [0; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// Appends one framed payload to `out`; `None` when the payload exceeds [`MAX_RECORD`].
pub(crate) fn frame(payload: &[u8], out: &mut Vec<u8>) -> Option<()> {
    if payload.len() > MAX_RECORD {
        return None;
    }
    out.extend_from_slice(&u32::try_from(payload.len()).ok()?.to_le_bytes());
    out.extend_from_slice(&checksum(payload));
    out.extend_from_slice(payload);
    Some(())
}

/// Where and why a run of frames stops early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Torn {
    /// Offset of the first bad frame within the buffer given to [`split`].
    pub(crate) offset: usize,
    pub(crate) reason: &'static str,
}

/// The payloads of the whole frames at the start of `buf`, and where the first torn or corrupt frame
/// begins (everything from there on is not trusted).
pub(crate) fn split(buf: &[u8]) -> (Vec<&[u8]>, Option<Torn>) {
    let mut frames = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let torn = |reason| Some(Torn { offset: at, reason });
        let Some(head) = buf.get(at..at + HEADER) else {
            return (frames, torn("a frame header cut short"));
        };
        let mut len = [0; 4];
        len.copy_from_slice(&head[..4]);
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_RECORD {
            return (frames, torn("a frame length above the cap"));
        }
        let Some(payload) = buf.get(at + HEADER..at + HEADER + len) else {
            return (frames, torn("a frame cut short"));
        };
        if head[4..] != checksum(payload) {
            return (frames, torn("a frame whose checksum does not match"));
        }
        frames.push(payload);
        at += HEADER + len;
    }
    (frames, None)
}

/// A payload that does not decode although its checksum matched: written by another format, not torn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed record: {0}")]
pub(crate) struct Malformed(pub(crate) &'static str);

/// Writes the payload encoding: little-endian integers, `u32`-length-prefixed byte strings.
#[derive(Default)]
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// Byte strings longer than `u32::MAX` cannot occur: payloads are capped far below.
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.0
            .extend_from_slice(&u32::try_from(v.len()).unwrap_or(u32::MAX).to_le_bytes());
        self.0.extend_from_slice(v);
    }
}

/// Reads what [`Writer`] wrote; every read is bounds-checked.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if n > self.0.len() {
            return Err(Malformed("a field runs past the end of the record"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Malformed> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4)?);
        self.take(u32::from_le_bytes(b) as usize)
    }

    pub(crate) fn string(&mut self) -> Result<String, Malformed> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| Malformed("a name that is not UTF-8"))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            frame(p, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn whole_frames_split_back_into_their_payloads() {
        let buf = framed(&[b"one", b"", b"three"]);
        let (frames, torn) = split(&buf);
        assert_eq!(frames, [&b"one"[..], b"", b"three"]);
        assert_eq!(torn, None);
    }

    #[test]
    fn a_damaged_frame_stops_the_run_where_it_starts() {
        let good = framed(&[b"one"]);
        let at = good.len();
        type Damage<'a> = Box<dyn Fn(&mut Vec<u8>) + 'a>;
        let cases: [(&str, Damage<'_>, &str); 4] = [
            ("header cut", Box::new(|b| b.truncate(at + 5)), "header cut short"),
            (
                "payload cut",
                Box::new(|b| b.truncate(b.len() - 1)),
                "frame cut short",
            ),
            (
                "flipped bit",
                Box::new(|b| {
                    let last = b.len() - 1;
                    b[last] ^= 1;
                }),
                "checksum",
            ),
            (
                "huge length",
                Box::new(|b| b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes())),
                "above the cap",
            ),
        ];
        for (name, damage, reason) in cases {
            let mut buf = framed(&[b"one", b"two"]);
            damage(&mut buf);
            let (frames, torn) = split(&buf);
            assert_eq!(frames, [&b"one"[..]], "{name}");
            let torn = torn.unwrap_or_else(|| panic!("{name}: not torn"));
            assert_eq!(torn.offset, at, "{name}");
            assert!(torn.reason.contains(reason), "{name}: {}", torn.reason);
        }
    }

    #[test]
    fn oversized_payloads_are_refused_when_written() {
        assert!(frame(&vec![0; MAX_RECORD + 1], &mut Vec::new()).is_none());
    }

    #[test]
    fn reads_past_the_end_are_errors() {
        let mut w = Writer::default();
        w.u8(7);
        w.u64(42);
        w.bytes(b"name");
        let mut r = Reader(&w.0);
        assert_eq!((r.u8(), r.u64(), r.string()), (Ok(7), Ok(42), Ok("name".into())));
        assert!(r.is_empty());
        assert!(r.u8().is_err());
        let mut lying = Writer::default();
        lying.u64(u64::MAX);
        assert!(Reader(&lying.0[..4]).bytes().is_err());
    }
}
