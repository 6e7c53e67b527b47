//! Physical column types and the choice of the narrowest one.

use serde::{Deserialize, Serialize};

/// The binary type of a column's values, little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum PhysType {
    /// unsigned 8-bit
    U8,
    /// signed 8-bit
    I8,
    /// unsigned 16-bit
    U16,
    /// signed 16-bit
    I16,
    /// unsigned 32-bit
    U32,
    /// signed 32-bit
    I32,
    /// signed 64-bit
    I64,
    /// 32-bit IEEE float
    F32,
    /// 64-bit IEEE float
    F64,
}

impl PhysType {
    /// Bytes per value.
    pub fn width(self) -> usize {
        match self {
            PhysType::U8 | PhysType::I8 => 1,
            PhysType::U16 | PhysType::I16 => 2,
            PhysType::U32 | PhysType::I32 | PhysType::F32 => 4,
            PhysType::I64 | PhysType::F64 => 8,
        }
    }

    /// Stable numeric code used in column file headers.
    pub fn code(self) -> u32 {
        self as u32 + 1
    }

    /// Inverse of [`code`](Self::code).
    pub fn from_code(c: u32) -> Option<Self> {
        use PhysType::*;
        [U8, I8, U16, I16, U32, I32, I64, F32, F64]
            .get((c as usize).wrapping_sub(1))
            .copied()
    }

    /// Lower-case name (`"u8"` …), also the numpy dtype name.
    pub fn name(self) -> &'static str {
        match self {
            PhysType::U8 => "u8",
            PhysType::I8 => "i8",
            PhysType::U16 => "u16",
            PhysType::I16 => "i16",
            PhysType::U32 => "u32",
            PhysType::I32 => "i32",
            PhysType::I64 => "i64",
            PhysType::F32 => "f32",
            PhysType::F64 => "f64",
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, PhysType::F32 | PhysType::F64)
    }

    /// Inclusive range of integer values the type can hold.
    pub fn int_range(self) -> (i64, i64) {
        match self {
            PhysType::U8 => (0, u8::MAX as i64),
            PhysType::I8 => (i8::MIN as i64, i8::MAX as i64),
            PhysType::U16 => (0, u16::MAX as i64),
            PhysType::I16 => (i16::MIN as i64, i16::MAX as i64),
            PhysType::U32 => (0, u32::MAX as i64),
            PhysType::I32 => (i32::MIN as i64, i32::MAX as i64),
            PhysType::I64 | PhysType::F32 | PhysType::F64 => (i64::MIN, i64::MAX),
        }
    }

    /// The code that marks a system-missing value in an integer column:
    /// the type's maximum for unsigned types, its minimum for signed ones.
    /// (Float columns use NaN.)
    pub fn null_code(self) -> i64 {
        let (lo, hi) = self.int_range();
        if lo == 0 {
            hi
        } else {
            lo
        }
    }

    /// The narrowest integer type holding every value in `min..=max`, plus a
    /// null code outside that range when `needs_null`.
    pub fn narrowest_int(min: i64, max: i64, needs_null: bool) -> PhysType {
        use PhysType::*;
        for t in [U8, I8, U16, I16, U32, I32] {
            let (lo, hi) = t.int_range();
            let (lo, hi) = if needs_null {
                if lo == 0 {
                    (lo, hi - 1)
                } else {
                    (lo + 1, hi)
                }
            } else {
                (lo, hi)
            };
            if min >= lo && max <= hi {
                return t;
            }
        }
        I64
    }
}

/// Rust types that can be stored in a column.
pub trait NativeType: Copy + Send + Sync + 'static {
    /// The matching physical type.
    const PHYS: PhysType;
    /// Little-endian bytes of a slice (a plain view on little-endian hosts).
    fn as_bytes(values: &[Self]) -> &[u8] {
        // SAFETY: all implementors are plain-old-data numbers without padding.
        unsafe {
            std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values))
        }
    }
}

macro_rules! native {
    ($t:ty, $p:ident) => {
        impl NativeType for $t {
            const PHYS: PhysType = PhysType::$p;
        }
    };
}
native!(u8, U8);
native!(i8, I8);
native!(u16, U16);
native!(i16, I16);
native!(u32, U32);
native!(i32, I32);
native!(i64, I64);
native!(f32, F32);
native!(f64, F64);

#[cfg(not(target_endian = "little"))]
compile_error!("microtab column files are little-endian and are mapped directly");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowest() {
        assert_eq!(PhysType::narrowest_int(1, 2, false), PhysType::U8);
        assert_eq!(PhysType::narrowest_int(0, 255, false), PhysType::U8);
        assert_eq!(PhysType::narrowest_int(0, 255, true), PhysType::U16);
        assert_eq!(PhysType::narrowest_int(-5, 100, false), PhysType::I8);
        assert_eq!(PhysType::narrowest_int(-128, 100, true), PhysType::I16);
        assert_eq!(PhysType::narrowest_int(-5, 300, false), PhysType::I16);
        assert_eq!(PhysType::narrowest_int(0, 9_999_999, false), PhysType::U32);
        assert_eq!(PhysType::narrowest_int(-1, 9_999_999, false), PhysType::I32);
        assert_eq!(PhysType::narrowest_int(0, 1 << 40, false), PhysType::I64);
        for t in [PhysType::U8, PhysType::F64, PhysType::I32] {
            assert_eq!(PhysType::from_code(t.code()), Some(t));
        }
    }
}
