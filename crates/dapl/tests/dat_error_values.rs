//! The numeric values of `ErrorType` and `Subtype` equal those of the real
//! `/usr/include/dat2/dat_error.h` (compiled with the system C compiler), so the C ABI maps a
//! `DatError` to a `DAT_RETURN` 1:1.
//!
//! Needs gcc and the headers (Debian `libdapl-dev`; the README's test command installs them).
//! Without them the test is skipped, unless `DAPLRS_REQUIRE_HEADERS=1` (set by the test script),
//! in which case it fails.

use std::process::Command;

use dapl::{ErrorType, Subtype};

#[test]
fn error_codes_match_dat_error_h() {
    let header = std::path::Path::new("/usr/include/dat2/dat_error.h");
    if !header.exists() {
        assert!(
            std::env::var("DAPLRS_REQUIRE_HEADERS").is_err(),
            "{} is missing (apt-get install libdapl-dev)",
            header.display()
        );
        eprintln!("skipped: {} is missing", header.display());
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("daplrs-codes-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let mut c = String::from("#include <stdio.h>\n#include <dat2/udat.h>\nint main(void){\n");
    for t in ErrorType::ALL {
        c += &format!(
            "printf(\"%s %u\\n\", \"{0}\", (unsigned)({0}));\n",
            t.c_name()
        );
    }
    for s in Subtype::ALL {
        c += &format!(
            "printf(\"%s %u\\n\", \"{0}\", (unsigned)({0}));\n",
            s.c_name()
        );
    }
    c += "return 0;}\n";
    std::fs::write(dir.join("codes.c"), c).unwrap();
    let st = Command::new("cc")
        .arg(dir.join("codes.c"))
        .arg("-o")
        .arg(dir.join("codes"))
        .status()
        .expect("run cc");
    assert!(st.success(), "compiling against dat_error.h failed");
    let out = Command::new(dir.join("codes")).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut n = 0;
    for t in ErrorType::ALL {
        let want = format!("{} {}", t.c_name(), *t as u32);
        assert!(
            text.lines().any(|l| l == want),
            "{want} not in the header's values"
        );
        n += 1;
    }
    for s in Subtype::ALL {
        let want = format!("{} {}", s.c_name(), *s as u16);
        assert!(
            text.lines().any(|l| l == want),
            "{want} not in the header's values"
        );
        n += 1;
    }
    assert_eq!(n, text.lines().count());
}
