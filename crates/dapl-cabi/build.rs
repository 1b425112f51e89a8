fn main() {
    // The registry's exports (dat_registry_add_provider, dats_get_ia_handle) come from libdat2.
    println!("cargo:rustc-link-lib=dat2");
    println!("cargo:rerun-if-changed=csrc/ext_shim.c");
    cc::Build::new()
        .file("csrc/ext_shim.c")
        .warnings(true)
        .compile("daplrs_ext_shim");
}
