//! DDI codebooks (the XML that IPUMS ships with every extract): reading
//! one ([`codebook`]) and completing the variables of any import from it
//! ([`describe`]: labels, value labels, missing codes).

mod codebook;
mod describe;

pub use codebook::*;
pub(crate) use describe::describe;
