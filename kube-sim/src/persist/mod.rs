//! Durable storage for one simulated cluster, as etcd keeps its own: an append-only log of committed
//! transactions (one framed, checksummed record each, fsynced before the write is answered) and a
//! snapshot the log is folded into once it grows, written to a temporary file, fsynced and renamed.
//!
//! On start the snapshot is loaded and the log replayed up to its first torn or corrupt record, which
//! is cut off with a warning: a crash mid-write loses at most that write, never the store. A damaged
//! snapshot (it is only ever renamed into place whole) or a record that checks out but does not decode
//! is an error instead: nothing known is dropped silently.

pub(crate) mod frame;
mod record;

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::crd;
use crate::kinds::{self, KINDS, KindId};
pub(crate) use record::{Entry, EntryRef, encode};

const LOG_FILE: &str = "wal";
const SNAPSHOT_FILE: &str = "snapshot";
const SNAPSHOT_TMP: &str = "snapshot.tmp";
const LOG_MAGIC: &[u8; 8] = b"KSIMLOG1";
const SNAPSHOT_MAGIC: &[u8; 8] = b"KSIMSNP1";
/// A log longer than this is folded into a new snapshot after the next write.
const COMPACT_AFTER: u64 = 8 << 20;

/// Why a store folder cannot be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is in use by another API server (one store folder serves one cluster)", path.display())]
    InUse { path: PathBuf },
    #[error("{}: {reason}; the store cannot be restored from it (remove the folder to start empty)", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("a record of {0} bytes is larger than the log takes")]
    TooLarge(usize),
    /// A record that checks out but that this API server cannot restore (written by another version).
    #[error("{0}: stored, but not restorable by this API server (remove the folder to start empty)")]
    Unreadable(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> PersistError + '_ {
    move |source| PersistError::Io {
        path: path.to_owned(),
        source,
    }
}

fn corrupt(path: &Path, reason: impl ToString) -> PersistError {
    PersistError::Corrupt {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// What an API server found in its store folder at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// Objects restored, across all kinds.
    pub objects: usize,
    /// The revision restored; new writes continue after it.
    pub revision: u64,
    /// The torn or corrupt end of the log that was cut off (what, and where), if any.
    pub truncated: Option<String>,
}

/// A store folder opened for writing, and the changes to restore from it in order.
pub(crate) struct Opened {
    pub(crate) log: Log,
    /// The snapshot's objects, then the log's changes after it.
    pub(crate) entries: Vec<Entry>,
    pub(crate) truncated: Option<String>,
}

/// The stable name of a store table, written with each change: a built-in kind's `apiVersion/plural`,
/// a custom resource's `crd:<plural>.<group>`.
pub(crate) fn table_name(kind: KindId) -> Option<String> {
    if kind < KINDS.len() {
        let k = kinds::by_id(kind);
        return Some(format!("{}/{}", k.api_version(), k.plural));
    }
    crd::table_resource(kind).map(|r| format!("crd:{r}"))
}

/// The table a stored name refers to in this process.
pub(crate) fn table_id(name: &str) -> Option<KindId> {
    if let Some(resource) = name.strip_prefix("crd:") {
        return Some(crd::table_id(resource));
    }
    (0..KINDS.len()).find(|id| table_name(*id).as_deref() == Some(name))
}

/// Opens (creating it if needed) and locks `dir`, and reads what it holds.
pub(crate) fn open(dir: &Path) -> Result<Opened, PersistError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let path = dir.join(LOG_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&path)
        .map_err(io_err(&path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(PersistError::InUse { path: dir.to_owned() }),
        Err(TryLockError::Error(e)) => return Err(io_err(&path)(e)),
    }
    // Left by a crash while compacting; the snapshot it was to replace is still whole.
    let tmp = dir.join(SNAPSHOT_TMP);
    if let Err(e) = std::fs::remove_file(&tmp)
        && e.kind() != io::ErrorKind::NotFound
    {
        return Err(io_err(&tmp)(e));
    }
    let (snapshot_rv, mut entries) = read_snapshot(&dir.join(SNAPSHOT_FILE))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf).map_err(io_err(&path))?;
    if buf.len() < LOG_MAGIC.len() && LOG_MAGIC.starts_with(&buf) {
        // New, or its header torn by a crash right after creation.
        file.set_len(0)
            .and_then(|()| file.write_all(LOG_MAGIC))
            .and_then(|()| file.sync_all())
            .map_err(io_err(&path))?;
        sync_dir(dir)?;
        buf = LOG_MAGIC.to_vec();
    }
    let Some(body) = buf.strip_prefix(LOG_MAGIC) else {
        return Err(corrupt(&path, "not a kube-sim log"));
    };
    let (frames, torn) = frame::split(body);
    let mut last = snapshot_rv;
    for payload in frames {
        let batch = record::decode_batch(payload).map_err(|e| corrupt(&path, e))?;
        // Changes the snapshot already holds: a crash came between its rename and the log's reset.
        for entry in batch.into_iter().filter(|e| e.rv > snapshot_rv) {
            if entry.rv <= last {
                return Err(corrupt(&path, format!("revision {} after {last}", entry.rv)));
            }
            last = entry.rv;
            entries.push(entry);
        }
    }
    let mut truncated = None;
    if let Some(torn) = torn {
        let keep = LOG_MAGIC.len() + torn.offset;
        let what = format!(
            "{} at byte {keep} of {} ({} bytes)",
            torn.reason,
            path.display(),
            buf.len() - keep
        );
        warn!(log = %path.display(), "cutting off the log's end, the write a crash interrupted: {what}");
        file.set_len(keep as u64)
            .and_then(|()| file.sync_all())
            .map_err(io_err(&path))?;
        truncated = Some(what);
    }
    let len = file.metadata().map_err(io_err(&path))?.len();
    let log = Log {
        dir: dir.to_owned(),
        file,
        len,
        stale: false,
        compact_after: COMPACT_AFTER,
    };
    Ok(Opened {
        log,
        entries,
        truncated,
    })
}

/// The snapshot's revision and objects; none when there is no snapshot yet.
fn read_snapshot(path: &Path) -> Result<(u64, Vec<Entry>), PersistError> {
    let buf = match std::fs::read(path) {
        Ok(buf) => buf,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((0, Vec::new())),
        Err(e) => return Err(io_err(path)(e)),
    };
    let Some(body) = buf.strip_prefix(SNAPSHOT_MAGIC) else {
        return Err(corrupt(path, "not a kube-sim snapshot"));
    };
    let (frames, torn) = frame::split(body);
    if let Some(torn) = torn {
        return Err(corrupt(
            path,
            format!("{} at byte {}", torn.reason, torn.offset + 8),
        ));
    }
    let Some((head, objects)) = frames.split_first() else {
        return Err(corrupt(path, "no header"));
    };
    let (rv, count) = record::decode_header(head).map_err(|e| corrupt(path, e))?;
    if objects.len() as u64 != count {
        return Err(corrupt(
            path,
            format!("{} objects where the header says {count}", objects.len()),
        ));
    }
    let entries = objects
        .iter()
        .map(|o| record::decode_object(o).map_err(|e| corrupt(path, e)))
        .collect::<Result<_, _>>()?;
    Ok((rv, entries))
}

fn sync_dir(dir: &Path) -> Result<(), PersistError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))
}

/// A new or emptied file only its owner can read: the store holds Secrets.
fn create_private(path: &Path) -> Result<File, PersistError> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err(path))
}

/// Writes `bytes` to `path` as a whole or not at all (owner-only): a temporary file, fsynced, renamed.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = create_private(&tmp)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// The open log of a store folder (locked for as long as it lives).
pub(crate) struct Log {
    dir: PathBuf,
    file: File,
    len: u64,
    /// A write failed: the log may miss a transaction, so nothing more is appended until a snapshot
    /// has captured the whole store again.
    stale: bool,
    /// The log length that triggers a snapshot ([`COMPACT_AFTER`]; tests lower it).
    pub(crate) compact_after: u64,
}

impl Log {
    /// Appends one transaction's record and waits for it to reach the disk.
    pub(crate) fn append(&mut self, payload: &[u8]) -> Result<(), PersistError> {
        if self.stale {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(payload.len() + 12);
        if frame::frame(payload, &mut buf).is_none() {
            self.stale = true;
            return Err(PersistError::TooLarge(payload.len()));
        }
        let path = self.dir.join(LOG_FILE);
        if let Err(e) = self.file.write_all(&buf).and_then(|()| self.file.sync_data()) {
            self.stale = true;
            // Best effort: a partial record would be cut off at the next start anyway.
            let _ = self.file.set_len(self.len);
            return Err(io_err(&path)(e));
        }
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Whether the store should be snapshotted now: the log is long, or missed a write.
    pub(crate) fn wants_snapshot(&self) -> bool {
        self.stale || self.len > self.compact_after
    }

    /// Replaces the snapshot with the whole store as of `rv` and empties the log.
    pub(crate) fn snapshot(&mut self, rv: u64, objects: &[EntryRef<'_>]) -> Result<(), PersistError> {
        let tmp = self.dir.join(SNAPSHOT_TMP);
        let file = create_private(&tmp)?;
        let mut out = BufWriter::new(file);
        let mut framed = SNAPSHOT_MAGIC.to_vec();
        let header = record::encode_header(rv, objects.len() as u64);
        frame::frame(&header, &mut framed).ok_or(PersistError::TooLarge(header.len()))?;
        for object in objects {
            let mut w = frame::Writer::default();
            record::encode(object, &mut w);
            frame::frame(&w.0, &mut framed).ok_or(PersistError::TooLarge(w.0.len()))?;
            if framed.len() > 1 << 20 {
                out.write_all(&framed).map_err(io_err(&tmp))?;
                framed.clear();
            }
        }
        out.write_all(&framed).map_err(io_err(&tmp))?;
        let file = out.into_inner().map_err(|e| io_err(&tmp)(e.into_error()))?;
        file.sync_all().map_err(io_err(&tmp))?;
        let path = self.dir.join(SNAPSHOT_FILE);
        std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
        sync_dir(&self.dir)?;
        // The snapshot holds everything; a crash before this reset only replays changes it skips.
        let log = self.dir.join(LOG_FILE);
        let header = LOG_MAGIC.len() as u64;
        self.file
            .set_len(header)
            .and_then(|()| self.file.sync_all())
            .map_err(io_err(&log))?;
        self.len = header;
        self.stale = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
