//! A deterministic synthetic census: IPUMS-style person records with
//! realistic ranges and dependencies between variables.
//!
//! Rows are generated in blocks of [`BLOCK`] records, each from its own
//! seeded generator, so blocks are produced in parallel and the output is
//! the same for a given seed whatever the number of threads.

/// Records per independently seeded block.
pub const BLOCK: usize = 1 << 16;

/// The variables written, in order (without replicate weights).
pub const HEADER: &str = "YEAR,SERIAL,PERNUM,PERWT,STATEFIP,PUMA,GQ,SEX,AGE,MARST,RACE,HISPAN,BPL,CITIZEN,EDUC,EMPSTAT,OCC,IND,UHRSWORK,INCTOT,INCWAGE,POVERTY\n";

/// The header line with `reps` person replicate weights `REPWTP1…` after
/// the other variables, and before them, with `strata`, the sampling
/// strata `STRATA` (see [`write_block`]).
pub fn header(reps: usize, strata: bool) -> String {
    let mut h = HEADER.trim_end().to_string();
    if strata {
        h += ",STRATA";
    }
    for r in 1..=reps {
        h += &format!(",REPWTP{r}");
    }
    h + "\n"
}

/// Successive-difference replicate factors (the ACS's): a household's
/// weight times 1 − 2^−1/2, 1 or 1 + 2^−1/2 in each replicate.
const REP_FACTORS: [f64; 3] = [
    1.0 - std::f64::consts::FRAC_1_SQRT_2,
    1.0,
    1.0 + std::f64::consts::FRAC_1_SQRT_2,
];

/// SplitMix64: tiny, fast, and its output is fixed by its definition, so a
/// seed names the same file in every version of microtab.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Self {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next();
        r
    }
    #[inline]
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`.
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }
    /// Uniform in `[0, 1)`.
    #[inline]
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    /// Index drawn with the given cumulative weights.
    fn pick(&mut self, cum: &[u32]) -> usize {
        let x = self.below(*cum.last().unwrap() as u64) as u32;
        cum.partition_point(|&c| c <= x)
    }
    fn normal(&mut self) -> f64 {
        // Box-Muller.
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

fn cumulative(w: &[u32]) -> Vec<u32> {
    let mut s = 0;
    w.iter()
        .map(|&x| {
            s += x;
            s
        })
        .collect()
}

/// State FIPS codes with rough 2000 population shares (per mille × 10).
const STATES: [(u8, u32); 51] = [
    (1, 159),
    (2, 22),
    (4, 181),
    (5, 95),
    (6, 1205),
    (8, 153),
    (9, 121),
    (10, 28),
    (11, 20),
    (12, 567),
    (13, 290),
    (15, 43),
    (16, 46),
    (17, 441),
    (18, 216),
    (19, 104),
    (20, 95),
    (21, 143),
    (22, 159),
    (23, 45),
    (24, 188),
    (25, 225),
    (26, 352),
    (27, 174),
    (28, 101),
    (29, 198),
    (30, 32),
    (31, 61),
    (32, 71),
    (33, 44),
    (34, 298),
    (35, 65),
    (36, 674),
    (37, 286),
    (38, 23),
    (39, 403),
    (40, 122),
    (41, 122),
    (42, 437),
    (44, 37),
    (45, 142),
    (46, 27),
    (47, 202),
    (48, 740),
    (49, 79),
    (50, 22),
    (51, 251),
    (53, 209),
    (54, 64),
    (55, 191),
    (56, 17),
];

/// Foreign birthplaces (IPUMS BPL general codes) and weights.
const FOREIGN_BPL: [(u16, u32); 10] = [
    (200, 30),
    (210, 6),
    (250, 8),
    (300, 5),
    (400, 10),
    (450, 6),
    (500, 6),
    (515, 5),
    (521, 5),
    (600, 3),
];

struct Tables {
    states: Vec<u32>,
    race: Vec<u32>,
    hispan: Vec<u32>,
    bpl: Vec<u32>,
    hh_size: Vec<u32>,
}

fn tables() -> Tables {
    Tables {
        states: cumulative(&STATES.map(|s| s.1)),
        race: cumulative(&[751, 123, 9, 8, 3, 30, 55, 19, 2]),
        hispan: cumulative(&[875, 73, 12, 5, 35]),
        bpl: cumulative(&FOREIGN_BPL.map(|b| b.1)),
        hh_size: cumulative(&[26, 33, 16, 14, 7, 4]),
    }
}

/// Appends `block`'s records (`rows` of them) as CSV text, each with
/// `reps` replicate weights (household-level SDR factors from a generator
/// of their own, so the other variables are the same whatever `reps`)
/// and, with `strata`, a STRATA variable (the state and a band of PUMAs;
/// about 2,350 strata, each of many households, the PSUs: SERIAL).
pub fn write_block(
    seed: u64,
    block: u64,
    rows: usize,
    (reps, strata): (usize, bool),
    out: &mut Vec<u8>,
) {
    let t = tables();
    let mut r = Rng::new(seed, block);
    let mut rr = Rng::new(seed ^ 0x5EED_4E97_0000_0001, block);
    let mut factors = vec![1.0; reps];
    let put = |out: &mut Vec<u8>, v: i64, last: bool| {
        out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        out.push(if last { b'\n' } else { b',' });
    };
    let mut done = 0usize;
    let mut hh = 0u64;
    while done < rows {
        hh += 1;
        let serial = block as i64 * BLOCK as i64 + hh as i64;
        let gq = match r.below(1000) {
            0..=969 => 1,
            970..=979 => 2,
            980..=994 => 3,
            _ => 4,
        };
        let size = if gq == 1 { r.pick(&t.hh_size) + 1 } else { 1 };
        let (st, _) = STATES[r.pick(&t.states)];
        let puma = r.range(100, 3700);
        let hh_weight = r.range(500, 6000); // in hundredths
        let hh_race = r.pick(&t.race) + 1;
        let hh_hisp = r.pick(&t.hispan);
        let head_age = r.range(18, 90);
        let hh_foreign = r.below(100) < 11;
        let mut poverty = r.range(1, 501);
        for f in factors.iter_mut() {
            *f = REP_FACTORS[rr.below(3) as usize];
        }
        for pernum in 1..=size {
            if done >= rows {
                break;
            }
            done += 1;
            let sex = 1 + r.below(2) as i64;
            let age: i64 = match pernum {
                1 => head_age,
                2 => (head_age + r.range(-6, 6)).clamp(16, 95),
                _ => {
                    if head_age < 60 {
                        r.range(0, (head_age - 16).clamp(0, 40))
                    } else {
                        r.range(0, 95)
                    }
                }
            };
            let age = age.min(95);
            let marst = if age < 15 {
                6
            } else if size > 1 && pernum <= 2 {
                if r.below(10) < 9 {
                    1
                } else {
                    2
                }
            } else {
                match r.below(100) {
                    0..=9 => 3,
                    10..=39 => 4,
                    40..=59 if age > 55 => 5,
                    _ => 6,
                }
            };
            let race = if r.below(100) < 93 {
                hh_race
            } else {
                r.pick(&t.race) + 1
            };
            let hispan = if r.below(100) < 95 {
                hh_hisp
            } else {
                r.pick(&t.hispan)
            };
            let foreign = hh_foreign && (age > 10 || r.below(3) == 0);
            let bpl: i64 = if foreign {
                FOREIGN_BPL[r.pick(&t.bpl)].0 as i64
            } else if r.below(100) < 70 {
                st as i64
            } else {
                STATES[r.pick(&t.states)].0 as i64
            };
            let citizen = if !foreign {
                0
            } else {
                match r.below(100) {
                    0..=4 => 1,
                    5..=44 => 2,
                    _ => 3,
                }
            };
            let educ: i64 = match age {
                0..=2 => 0,
                3..=10 => 1,
                11..=14 => 2,
                15 => 3,
                16 => 4,
                17 => 5,
                _ => {
                    let z = r.normal() * 2.2 + 7.2;
                    z.round().clamp(2.0, 11.0) as i64
                }
            };
            let empstat: i64 = if age < 16 {
                0
            } else {
                let p_emp = if age > 70 {
                    10
                } else if age > 62 {
                    35
                } else {
                    62 + educ as u64 * 2
                };
                let x = r.below(100);
                if x < p_emp {
                    1
                } else if x < p_emp + 5 {
                    2
                } else {
                    3
                }
            };
            let employed = empstat == 1;
            let occ = if employed { r.range(1, 983) } else { 0 };
            let ind = if employed { r.range(17, 992) } else { 0 };
            let uhrswork = if employed {
                let h = 40.0 + r.normal() * 9.0;
                h.round().clamp(1.0, 99.0) as i64
            } else {
                0
            };
            let (inctot, incwage) = if age < 15 {
                (9_999_999, 999_999)
            } else {
                let wage = if employed {
                    let base = 9.4 + 0.12 * educ as f64 + r.normal() * 0.8;
                    (base.exp() * (uhrswork as f64 / 40.0))
                        .round()
                        .min(999_998.0) as i64
                } else {
                    0
                };
                let other = match r.below(10) {
                    0..=5 => 0,
                    6..=8 => (r.unit() * 15_000.0) as i64,
                    _ => r.range(-9_000, 60_000),
                };
                let other = if age > 64 {
                    other + r.range(5_000, 25_000)
                } else {
                    other
                };
                (wage + other, wage)
            };
            if gq != 1 {
                poverty = 0;
            }
            let perwt = (hh_weight + r.range(-150, 150)).max(100);
            put(out, 2000, false);
            put(out, serial, false);
            put(out, pernum as i64, false);
            out.extend_from_slice(itoa::Buffer::new().format(perwt / 100).as_bytes());
            out.push(b'.');
            let cents = perwt % 100;
            out.push(b'0' + (cents / 10) as u8);
            out.push(b'0' + (cents % 10) as u8);
            out.push(b',');
            for v in [
                st as i64,
                puma,
                gq,
                sex,
                age,
                marst,
                race as i64,
                hispan as i64,
                bpl,
                citizen,
                educ,
                empstat,
                occ,
                ind,
                uhrswork,
                inctot,
                incwage,
            ] {
                put(out, v, false);
            }
            put(out, poverty, reps == 0 && !strata);
            if strata {
                // About 2,350 strata, as the ACS's PUMA-based STRATA:
                // the state and a band of 80 PUMA codes.
                put(out, st as i64 * 100 + puma / 80, reps == 0);
            }
            for (k, f) in factors.iter().enumerate() {
                // In hundredths, as PERWT.
                let w = (perwt as f64 * f).round() as i64;
                out.extend_from_slice(itoa::Buffer::new().format(w / 100).as_bytes());
                out.push(b'.');
                out.push(b'0' + (w % 100 / 10) as u8);
                out.push(b'0' + (w % 10) as u8);
                out.push(if k + 1 == reps { b'\n' } else { b',' });
            }
        }
    }
}
