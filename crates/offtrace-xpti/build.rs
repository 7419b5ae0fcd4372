//! Compiles the C++ shim (`cpp/instance_shim.cpp`): the libstdc++ metadata map image and the four
//! XPTI C++ interfaces with their Itanium vtables.
fn main() {
    println!("cargo:rerun-if-changed=cpp/instance_shim.cpp");
    cc::Build::new()
        .cpp(true)
        .file("cpp/instance_shim.cpp")
        .flag_if_supported("-std=c++17")
        .flag_if_supported("-fno-exceptions")
        .flag_if_supported("-fvisibility=hidden")
        // The map fast path writes the libstdc++ map image through its own struct view.
        .flag_if_supported("-fno-strict-aliasing")
        .opt_level(2)
        .compile("offtrace_xpti_shim");
}
