//! Log sequence numbers: positions in PostgreSQL's write-ahead log, written `X/Y` (two
//! hexadecimal halves).

use std::fmt;
use std::str::FromStr;

/// A position in the write-ahead log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

impl FromStr for Lsn {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("'{text}' is not a WAL position (X/Y in hexadecimal)");
        let (high, low) = text.trim().split_once('/').ok_or_else(bad)?;
        let high = u32::from_str_radix(high, 16).map_err(|_| bad())?;
        let low = u32::from_str_radix(low, 16).map_err(|_| bad())?;
        Ok(Lsn((u64::from(high) << 32) | u64::from(low)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text() {
        for lsn in [Lsn(0), Lsn(0x16_B374_D848), Lsn(u64::MAX)] {
            assert_eq!(lsn.to_string().parse::<Lsn>(), Ok(lsn));
        }
        assert_eq!("16/B374D848".parse::<Lsn>(), Ok(Lsn(0x16_B374_D848)));
        assert!("16B374D848".parse::<Lsn>().is_err());
        assert!("1/2/3".parse::<Lsn>().is_err());
    }
}
