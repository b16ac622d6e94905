//! Content hashes of model files, so every verdict can name exactly which weights produced it.
//! Hashing a multi-gigabyte file takes seconds, so the result is remembered per (path, size, mtime).

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{EngineError, Result};

/// Hex sha256 of one file, from the memo when the file is unchanged.
pub fn file_sha256(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| EngineError::io(path, e))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let key = hex(&Sha256::digest(
        format!("{}\0{}\0{mtime}", canonical.display(), meta.len()).as_bytes(),
    ));
    let memo = memo_dir().map(|dir| dir.join(key));
    if let Some(cached) = memo.as_ref().and_then(|m| std::fs::read_to_string(m).ok()) {
        if cached.len() == 64 {
            return Ok(cached);
        }
    }
    let mut file = std::fs::File::open(path).map_err(|e| EngineError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| EngineError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let digest = hex(&hasher.finalize());
    if let Some(memo) = memo {
        // A memo that cannot be written only costs a re-hash next time.
        // Written atomically: a torn memo would name a hash no file has, and heads bound to the
        // model's hash would be refused.
        if let Err(e) = aegis_files::write_atomically(&memo, digest.as_bytes()) {
            tracing::debug!(memo = %memo.display(), error = %e, "model hash memo not written");
        }
    }
    Ok(digest)
}

/// One hash for several files (safetensors shards): the hash of their hashes in order.
pub fn files_sha256(paths: &[PathBuf]) -> Result<String> {
    if let [single] = paths {
        return file_sha256(single);
    }
    let mut hasher = Sha256::new();
    for path in paths {
        hasher.update(file_sha256(path)?.as_bytes());
    }
    Ok(hex(&hasher.finalize()))
}

fn memo_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join("aegis").join("hashes"))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_known_content_and_remembers_it() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| EngineError::io("tempdir", e))?;
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").map_err(|e| EngineError::io(&path, e))?;
        let expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(file_sha256(&path)?, expected);
        assert_eq!(file_sha256(&path)?, expected);
        Ok(())
    }
}
