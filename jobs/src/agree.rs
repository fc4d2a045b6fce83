//! Ranks agree on their job before they run it.
//!
//! Under `mpirun`, every rank parses its own command line and reads its own files: ranks
//! started with different arguments (an MPMD launch, `mpirun -np 1 skein ... : -np 1 skein
//! ...`), or reading different copies of one graph file path (node-local copies on a
//! cluster), would build a mixed graph and pass validation, or wait forever in collectives
//! that do not match. So every command that runs on every rank calls [`agree`] as its
//! **first collective**, with a digest of what it will run: named fields (the command, the
//! kernel, the graph source and its parameters, roots, engine options, the output paths
//! that rank 0 writes) and, for a `.skg` graph file, its size and a hash of its content
//! computed by each rank on its own copy ([`file_fields`]). Every rank gathers every rank's
//! digest and, when any field differs, every rank fails with the same message naming the
//! fields and which ranks hold which value; no mismatched collective is ever reached.
//!
//! A digest is built without failing (a job file that does not load, a graph file that
//! cannot be read, become the field's value), so that a rank whose input is bad still takes
//! part in the agreement: a bad input on one rank only is a disagreement, on every rank the
//! same error after agreeing.
//!
//! With one rank (or a build without the `mpi` feature) [`agree`] does nothing.

use std::path::Path;

/// A digest field: its name and this rank's value.
pub(crate) type Field = (String, String);

/// Shorthand for a field.
pub(crate) fn field(name: &str, value: impl std::fmt::Display) -> Field {
    (name.to_string(), value.to_string())
}

/// The facts of a graph file that every rank must share: for a `.skg` file (read by every
/// rank at its own offsets) its size and a hash of every byte, computed here on this rank's
/// copy (one sequential read of the file); nothing for other sources (text files, pipes and
/// `-` are read by rank 0 alone and handed out). Only computed under `mpirun` with more than
/// one rank: the one-process reader checks the file's checksum itself.
pub(crate) fn file_fields(path: &Path) -> Vec<Field> {
    if skein::ranks() <= 1 || path.extension().and_then(|e| e.to_str()) != Some("skg") {
        return Vec::new();
    }
    let facts = match content_hash(path) {
        Ok((len, hash)) => format!("{len} bytes, content hash {hash:016x}"),
        Err(e) => format!("cannot read it: {e}"),
    };
    vec![field("graph file content", facts)]
}

/// The length of the file at `path` and a 64-bit hash of its bytes (std's SipHash, in reads
/// of 8 MiB into one buffer).
fn content_hash(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::hash::Hasher;
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut h = std::hash::DefaultHasher::new();
    let mut buf = vec![0u8; 8 << 20];
    let mut len = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.write(&buf[..n]);
        len += n as u64;
    }
    Ok((len, h.finish()))
}

/// Every rank's digest compared (collective: the first of the command, on every rank): an
/// error naming each field that differs and the ranks holding each value, the same on every
/// rank. `fields` starts with the command's name, so ranks running different commands
/// disagree on it.
#[cfg(feature = "mpi")]
pub(crate) fn agree(fields: &[Field]) -> anyhow::Result<()> {
    use skein_generators::distributed::mpi::MpiExchange;
    use skein_generators::distributed::Exchange;
    if skein::ranks() <= 1 {
        return Ok(());
    }
    let mut ex = MpiExchange::world()?;
    let ranks = ex.ranks();
    let mine = encode(fields);
    let send: Vec<u64> = (0..ranks).flat_map(|_| mine.iter().copied()).collect();
    let (recv, counts) = ex
        .exchange(&send, &vec![mine.len(); ranks])
        .map_err(|e| anyhow::anyhow!("the ranks could not compare their jobs: {e}"))?;
    let mut all = Vec::with_capacity(ranks);
    let mut at = 0;
    for (r, &c) in counts.iter().enumerate() {
        let words = recv.get(at..at + c).unwrap_or(&[]);
        at += c;
        all.push(decode(words).ok_or_else(|| {
            anyhow::anyhow!("the ranks could not compare their jobs: rank {r}'s digest is torn")
        })?);
    }
    compare(&all)
}

/// Without the `mpi` feature there is one rank: nothing to compare.
#[cfg(not(feature = "mpi"))]
pub(crate) fn agree(_fields: &[Field]) -> anyhow::Result<()> {
    Ok(())
}

/// The fields as words: the byte count, then the bytes (each field as two length-prefixed
/// strings), zero-padded to whole words.
#[cfg_attr(not(any(test, feature = "mpi")), allow(dead_code))]
fn encode(fields: &[Field]) -> Vec<u64> {
    let mut bytes = Vec::new();
    for (k, v) in fields {
        for s in [k, v] {
            bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
            bytes.extend_from_slice(s.as_bytes());
        }
    }
    let mut words = vec![bytes.len() as u64];
    words.extend(bytes.chunks(8).map(|c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(w)
    }));
    words
}

/// [`encode`]'s fields back; `None` when the words are not a whole digest.
#[cfg_attr(not(any(test, feature = "mpi")), allow(dead_code))]
fn decode(words: &[u64]) -> Option<Vec<Field>> {
    let (&len, rest) = words.split_first()?;
    let bytes: Vec<u8> = rest.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut bytes = bytes.get(..usize::try_from(len).ok()?)?;
    let mut take = || -> Option<String> {
        let (n, tail) = bytes.split_at_checked(8)?;
        let n = usize::try_from(u64::from_le_bytes(n.try_into().ok()?)).ok()?;
        let (s, tail) = tail.split_at_checked(n)?;
        bytes = tail;
        String::from_utf8(s.to_vec()).ok()
    };
    let mut fields = Vec::new();
    while let Some(k) = take() {
        fields.push((k, take()?));
    }
    Some(fields)
}

/// The verdict over every rank's digest (in rank order): `Ok` when they are all equal,
/// else the error naming each field that differs (at most 4) with the ranks of each value.
#[cfg_attr(not(any(test, feature = "mpi")), allow(dead_code))]
fn compare(all: &[Vec<Field>]) -> anyhow::Result<()> {
    let mut names: Vec<&str> = Vec::new();
    for digest in all {
        for (k, _) in digest {
            if !names.contains(&k.as_str()) {
                names.push(k);
            }
        }
    }
    let mut differences = Vec::new();
    for name in names {
        let value = |d: &Vec<Field>| {
            d.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or("(none)".into())
        };
        // Each distinct value with the ranks that hold it, in order of first appearance.
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (r, d) in all.iter().enumerate() {
            let v = value(d);
            match groups.iter_mut().find(|(g, _)| *g == v) {
                Some((_, rs)) => rs.push(r),
                None => groups.push((v, vec![r])),
            }
        }
        if groups.len() > 1 {
            let held: Vec<String> =
                groups.iter().map(|(v, rs)| format!("{} {v:?}", ranks_text(rs))).collect();
            differences.push(format!("`{name}`: {}", held.join(", ")));
        }
    }
    if differences.is_empty() {
        return Ok(());
    }
    let more = differences.len().saturating_sub(4);
    differences.truncate(4);
    if more > 0 {
        differences.push(format!("and {more} more field(s)"));
    }
    anyhow::bail!(
        "the {} ranks do not agree on their job (mpirun started them with different arguments, \
         or they read different files), so none runs it: {}",
        all.len(),
        differences.join("; ")
    )
}

/// "rank 3" or "ranks 0, 2".
fn ranks_text(rs: &[usize]) -> String {
    let list: Vec<String> = rs.iter().map(|r| r.to_string()).collect();
    if rs.len() == 1 {
        format!("rank {} has", list[0])
    } else {
        format!("ranks {} have", list.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(graph: &str) -> Vec<Field> {
        vec![field("command", "sssp"), field("graph", graph), field("roots", 2)]
    }

    #[test]
    fn digests_travel_as_words() {
        let d = vec![field("command", "run"), field("é", ""), field("", "x\0y")];
        assert_eq!(decode(&encode(&d)).unwrap(), d);
        assert_eq!(decode(&encode(&[])).unwrap(), Vec::<Field>::new());
        let mut torn = encode(&d);
        torn.pop();
        assert!(decode(&torn).is_none());
    }

    #[test]
    fn a_difference_names_the_field_and_the_ranks() {
        assert!(compare(&[digest("kron:8"), digest("kron:8")]).is_ok());
        let e = compare(&[digest("kron:8:16"), digest("kron:8:8"), digest("kron:8:16")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("the 3 ranks do not agree on their job"), "{e}");
        assert!(
            e.contains(r#"`graph`: ranks 0, 2 have "kron:8:16", rank 1 has "kron:8:8""#),
            "{e}"
        );
        assert!(!e.contains("`roots`"), "{e}");
        // A field only one rank has (another command's digest).
        let other = vec![field("command", "bench"), field("arguments", "Echo")];
        let e = compare(&[digest("kron:8"), other]).unwrap_err().to_string();
        assert!(e.contains(r#"`command`: rank 0 has "sssp", rank 1 has "bench""#), "{e}");
        assert!(e.contains(r#"`arguments`: rank 0 has "(none)", rank 1 has "Echo""#), "{e}");
    }
}
