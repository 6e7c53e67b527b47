//! The data of a system file as a stream of uncompressed records: as
//! stored, or decompressed from SPSS's bytecode (8 control bytes, then the
//! 8-byte values they call for) or from `.zsav`'s zlib blocks of bytecode.

use std::io::{self, BufReader, Read, Seek, SeekFrom, Take};

/// Bytecode decompression: each control byte is 0 (padding), 1–251 (the
/// number `code − bias`), 252 (end of data), 253 (8 raw bytes follow),
/// 254 (eight spaces) or 255 (system-missing).
pub(crate) struct Bytecode<R> {
    r: R,
    bias: f64,
    big: bool,
    sysmis: u64,
    ctrl: [u8; 8],
    next: usize,
    out: Vec<u8>,
    done: bool,
}

impl<R: Read> Bytecode<R> {
    pub(crate) fn new(r: R, bias: f64, big: bool, sysmis: u64) -> Self {
        Bytecode {
            r,
            bias,
            big,
            sysmis,
            ctrl: [0; 8],
            next: 8,
            out: Vec::new(),
            done: false,
        }
    }

    fn word(&self, v: u64) -> [u8; 8] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    /// Decodes until `want` bytes are ready or the data end.
    fn fill(&mut self, want: usize) -> io::Result<()> {
        while self.out.len() < want && !self.done {
            if self.next == 8 {
                let got = read_full(&mut self.r, &mut self.ctrl)?;
                if got < 8 {
                    // The data end (a partial control block is dropped;
                    // a partial record is the caller's error).
                    self.done = true;
                    break;
                }
                self.next = 0;
            }
            let code = self.ctrl[self.next];
            self.next += 1;
            match code {
                0 => {}
                252 => self.done = true,
                253 => {
                    let mut w = [0u8; 8];
                    if read_full(&mut self.r, &mut w)? < 8 {
                        self.done = true;
                        break;
                    }
                    self.out.extend_from_slice(&w);
                }
                254 => self.out.extend_from_slice(b"        "),
                255 => {
                    let w = self.word(self.sysmis);
                    self.out.extend_from_slice(&w);
                }
                c => {
                    let w = self.word((c as f64 - self.bias).to_bits());
                    self.out.extend_from_slice(&w);
                }
            }
        }
        Ok(())
    }
}

impl<R: Read> Read for Bytecode<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.fill(buf.len())?;
        let n = buf.len().min(self.out.len());
        buf[..n].copy_from_slice(&self.out[..n]);
        self.out.drain(..n);
        Ok(n)
    }
}

fn read_full(r: &mut impl Read, b: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < b.len() {
        match r.read(&mut b[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// One zlib block of a `.zsav` file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Block {
    pub offset: u64,
    pub len: u64,
}

/// The inflated blocks of a `.zsav` file, one after the other.
pub(crate) struct Zlib {
    file: std::fs::File,
    blocks: Vec<Block>,
    next: usize,
    cur: Option<flate2::read::ZlibDecoder<Take<BufReader<std::fs::File>>>>,
}

impl Zlib {
    pub(crate) fn new(file: std::fs::File, blocks: Vec<Block>) -> Zlib {
        Zlib {
            file,
            blocks,
            next: 0,
            cur: None,
        }
    }
}

impl Read for Zlib {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some(d) = &mut self.cur {
                let n = d.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.cur = None;
            }
            let Some(b) = self.blocks.get(self.next).copied() else {
                return Ok(0);
            };
            self.next += 1;
            let mut f = self.file.try_clone()?;
            f.seek(SeekFrom::Start(b.offset))?;
            self.cur = Some(flate2::read::ZlibDecoder::new(
                BufReader::with_capacity(1 << 16, f).take(b.len),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytecode_as_spss_writes_it() {
        // 1.0 (code 101 with bias 100), sysmis, eight spaces, a raw
        // value, then the end.
        let mut data = vec![101, 255, 254, 253, 252, 0, 0, 0];
        data.extend_from_slice(&2.5f64.to_le_bytes());
        let sysmis = (-f64::MAX).to_bits();
        let mut d = Bytecode::new(&data[..], 100.0, false, sysmis);
        let mut out = Vec::new();
        d.read_to_end(&mut out).unwrap();
        assert_eq!(out.len(), 32);
        assert_eq!(f64::from_le_bytes(out[0..8].try_into().unwrap()), 1.0);
        assert_eq!(u64::from_le_bytes(out[8..16].try_into().unwrap()), sysmis);
        assert_eq!(&out[16..24], b"        ");
        assert_eq!(f64::from_le_bytes(out[24..32].try_into().unwrap()), 2.5);
    }
}
