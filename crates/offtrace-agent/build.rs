// The agent is dlopen'ed by the XPTI dispatcher and may be dlclose'd while its writer thread
// runs (xptiFrameworkFinalize): mark it NODELETE so its code stays mapped until exit.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
