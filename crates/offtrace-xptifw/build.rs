//! Gives the dispatcher the SONAME the SYCL runtime and subscribers look for, and `-z nodelete`
//! semantics like Intel's binary: the proxy `dlclose`s the dispatcher at shutdown while other
//! code may still hold pointers into it (callbacks, thread-local destructors).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libxptifw.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
}
