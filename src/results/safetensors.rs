//! A minimal safetensors writer for int32 tensors (the format: an 8-byte little-endian
//! header length, a JSON header naming each tensor's dtype, shape and byte range, then the
//! raw little-endian data; <https://github.com/huggingface/safetensors>). Any language reads
//! it: Python with `safetensors` or ten lines of numpy, Rust with the `safetensors` crate.

use super::atomic::write_atomic;
use anyhow::{ensure, Result};
use serde_json::{json, Map, Value};
use std::path::Path;

/// Named int32 tensors, written in the order they were added.
#[derive(Debug, Default)]
pub struct Tensors {
    entries: Vec<(String, Vec<usize>, Vec<i32>)>,
}

impl Tensors {
    /// Adds `values` as a tensor of `shape` (row-major); their counts must agree.
    pub fn add(&mut self, name: impl Into<String>, shape: &[usize], values: &[i32]) -> Result<()> {
        let name = name.into();
        ensure!(
            shape.iter().product::<usize>() == values.len(),
            "tensor {name}: shape {shape:?} does not hold {} values",
            values.len()
        );
        ensure!(
            !self.entries.iter().any(|(n, _, _)| *n == name),
            "tensor {name} added twice"
        );
        self.entries.push((name, shape.to_vec(), values.to_vec()));
        Ok(())
    }

    /// The file's bytes; `metadata` goes into the header's `__metadata__` (string values).
    pub fn to_bytes(&self, metadata: &[(&str, String)]) -> Vec<u8> {
        let mut header = Map::new();
        let meta: Map<String, Value> = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.clone())))
            .collect();
        header.insert("__metadata__".into(), Value::Object(meta));
        let mut offset = 0;
        for (name, shape, values) in &self.entries {
            let end = offset + values.len() * 4;
            header.insert(
                name.clone(),
                json!({"dtype": "I32", "shape": shape, "data_offsets": [offset, end]}),
            );
            offset = end;
        }
        let mut text = Value::Object(header).to_string().into_bytes();
        // The data starts 8-byte aligned, as the format recommends.
        while !(8 + text.len()).is_multiple_of(8) {
            text.push(b' ');
        }
        let mut bytes = Vec::with_capacity(8 + text.len() + offset);
        bytes.extend_from_slice(&(text.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&text);
        for (_, _, values) in &self.entries {
            values
                .iter()
                .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes()));
        }
        bytes
    }

    /// Writes the file atomically.
    pub fn write(&self, path: &Path, metadata: &[(&str, String)]) -> Result<()> {
        write_atomic(path, &self.to_bytes(metadata))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_data_follow_the_format() {
        let mut t = Tensors::default();
        t.add("a", &[2, 2], &[1, -2, 3, 4]).unwrap();
        t.add("b", &[1], &[7]).unwrap();
        assert!(
            t.add("c", &[3], &[1, 2]).is_err(),
            "shape must match the values"
        );
        assert!(t.add("a", &[1], &[1]).is_err(), "names are unique");
        let bytes = t.to_bytes(&[("case", "3".into())]);
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!((8 + n) % 8, 0, "data is 8-byte aligned");
        let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        assert_eq!(header["a"]["dtype"], "I32");
        assert_eq!(header["a"]["shape"], json!([2, 2]));
        assert_eq!(header["b"]["data_offsets"], json!([16, 20]));
        assert_eq!(header["__metadata__"]["case"], "3");
        let data = &bytes[8 + n..];
        assert_eq!(data.len(), 20);
        assert_eq!(i32::from_le_bytes(data[4..8].try_into().unwrap()), -2);
        assert_eq!(i32::from_le_bytes(data[16..20].try_into().unwrap()), 7);
    }
}
