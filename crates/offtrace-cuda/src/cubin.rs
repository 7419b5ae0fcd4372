//! The kernels a loaded CUDA module holds, read from its cubin (the ELF image CUPTI's module
//! callback points at), so that a module's code-object record is named by what it contains
//! instead of the same `cuda_module` for all of them: a PyTorch process loads hundreds.
//!
//! A cubin is an ELF64 little-endian image whose symbol table marks each kernel entry as a
//! function symbol (`STT_FUNC`) with `STO_CUDA_ENTRY` (0x10) in `st_other`, whatever its binding:
//! a kernel in an anonymous namespace is local (PyTorch's `at::native::(anonymous)::...` kernels),
//! and a device function that was not inlined is a function without the mark. An image whose
//! symbols carry no such mark at all (an older toolchain's) falls back to the global function
//! symbols. Everything is read bounds-checked from the bytes CUPTI gave: an image that is not
//! such an ELF (a PTX text, a truncated or foreign image) has no kernels here, and the module
//! keeps the generic name.

/// The kernel entries of `image`'s symbol table, in table order, mangled. Empty for anything
/// that is not a well-formed ELF64 little-endian image.
pub fn kernel_names(image: &[u8]) -> Vec<&[u8]> {
    kernels(image).unwrap_or_default()
}

const SHT_SYMTAB: u32 = 2;
const STT_FUNC: u8 = 2;
const STB_GLOBAL: u8 = 1;
/// `st_other` bit of a CUDA kernel entry (`__global__` function).
const STO_CUDA_ENTRY: u8 = 0x10;
const SHDR_SIZE: usize = 64;
const SYM_SIZE: usize = 24;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?)).ok()
}

/// A section's (type, offset, size, link) from the section header table.
fn section(image: &[u8], table: usize, index: usize) -> Option<(u32, usize, usize, usize)> {
    let h = table.checked_add(index.checked_mul(SHDR_SIZE)?)?;
    let header = image.get(h..h.checked_add(SHDR_SIZE)?)?;
    Some((u32_at(header, 4)?, u64_at(header, 24)?, u64_at(header, 32)?, u32_at(header, 40)? as usize))
}

fn kernels(image: &[u8]) -> Option<Vec<&[u8]>> {
    // ELF magic, ELFCLASS64, ELFDATA2LSB.
    if image.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let table = u64_at(image, 0x28)?;
    if u16_at(image, 0x3a)? as usize != SHDR_SIZE {
        return None;
    }
    let count = u16_at(image, 0x3c)? as usize;
    // (name, marked as an entry, global)
    let mut functions = Vec::new();
    for i in 0..count {
        let (kind, offset, size, link) = section(image, table, i)?;
        if kind != SHT_SYMTAB {
            continue;
        }
        let symbols = image.get(offset..offset.checked_add(size)?)?;
        let (_, str_offset, str_size, _) = section(image, table, link)?;
        let strings = image.get(str_offset..str_offset.checked_add(str_size)?)?;
        for sym in symbols.chunks_exact(SYM_SIZE) {
            let (info, other) = (sym[4], sym[5]);
            if info & 0xf != STT_FUNC {
                continue;
            }
            let at = u32_at(sym, 0)? as usize;
            let rest = strings.get(at..)?;
            let name = &rest[..rest.iter().position(|&b| b == 0)?];
            if !name.is_empty() {
                functions.push((name, other & STO_CUDA_ENTRY != 0, info >> 4 == STB_GLOBAL));
            }
        }
    }
    let marked = functions.iter().any(|&(_, entry, _)| entry);
    Some(functions.into_iter().filter(|&(_, entry, global)| if marked { entry } else { global }).map(|f| f.0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 image: a null section, a string table, a symbol table with the given
    /// (name, info) symbols after the null symbol.
    fn image(symbols: &[(&str, u8, u8)]) -> Vec<u8> {
        let mut strtab = vec![0u8];
        let mut symtab = vec![0u8; SYM_SIZE];
        for (name, info, other) in symbols {
            let at = strtab.len() as u32;
            strtab.extend_from_slice(name.as_bytes());
            strtab.push(0);
            let mut s = [0u8; SYM_SIZE];
            s[..4].copy_from_slice(&at.to_le_bytes());
            s[4] = *info;
            s[5] = *other;
            symtab.extend_from_slice(&s);
        }
        let str_off = 64usize;
        let sym_off = str_off + strtab.len();
        let shoff = sym_off + symtab.len();
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&(SHDR_SIZE as u16).to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        b.extend_from_slice(&strtab);
        b.extend_from_slice(&symtab);
        let header = |kind: u32, off: usize, size: usize, link: u32| {
            let mut h = [0u8; SHDR_SIZE];
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[24..32].copy_from_slice(&(off as u64).to_le_bytes());
            h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
            h[40..44].copy_from_slice(&link.to_le_bytes());
            h
        };
        b.extend_from_slice(&[0u8; SHDR_SIZE]);
        b.extend_from_slice(&header(3, str_off, strtab.len(), 0));
        b.extend_from_slice(&header(SHT_SYMTAB, sym_off, symtab.len(), 1));
        b
    }

    const GLOBAL_FUNC: u8 = (STB_GLOBAL << 4) | STT_FUNC;
    const LOCAL_FUNC: u8 = STT_FUNC;
    const GLOBAL_OBJECT: u8 = (STB_GLOBAL << 4) | 1;

    #[test]
    fn entries_are_the_kernels_in_table_order_local_ones_too() {
        let img = image(&[
            ("_Z6vecAddPfS_S_", GLOBAL_FUNC, STO_CUDA_ENTRY),
            ("_Z6helperv", LOCAL_FUNC, 0),
            ("_Z10noinline_fv", GLOBAL_FUNC, 0),
            ("table", GLOBAL_OBJECT, 0),
            ("_ZN2at6native55_GLOBAL__N__k", LOCAL_FUNC, STO_CUDA_ENTRY),
            ("triton_poi_fused_add_0", GLOBAL_FUNC, STO_CUDA_ENTRY),
        ]);
        assert_eq!(
            kernel_names(&img),
            vec![&b"_Z6vecAddPfS_S_"[..], &b"_ZN2at6native55_GLOBAL__N__k"[..], &b"triton_poi_fused_add_0"[..]]
        );
    }

    #[test]
    fn without_entry_marks_the_global_functions_are_the_kernels() {
        let img = image(&[("k1", GLOBAL_FUNC, 0), ("_Z6helperv", LOCAL_FUNC, 0), ("k2", GLOBAL_FUNC, 0)]);
        assert_eq!(kernel_names(&img), vec![&b"k1"[..], &b"k2"[..]]);
    }

    #[test]
    fn a_module_is_named_by_its_shortest_kernel_demangled_and_how_many_more() {
        use crate::emit::module_name;
        assert_eq!(module_name(&[]).to_bytes(), b"cuda_module");
        assert_eq!(module_name(&[b"_Z6vecAddPfS_S_"]).to_bytes(), b"vecAdd(float*, float*, float*)");
        // The shortest mangled name, the first of equals in table order.
        assert_eq!(module_name(&[b"triton_poi_0", b"_Z1kv", b"xyzab"]).to_bytes(), b"k() (+2 kernels)");
        assert_eq!(
            module_name(&[b"_Z6vecAddPfS_S_", b"_Z6vecSubPfS_S_"]).to_bytes(),
            b"vecAdd(float*, float*, float*) (+1 kernel)"
        );
        let long = format!("_Z1fI{}EvT_", "N2at6native8FunctorIiEE".repeat(40));
        assert_eq!(module_name(&[long.as_bytes(), b"_Z4tinyv"]).to_bytes(), b"tiny() (+1 kernel)");
    }

    #[test]
    fn anything_else_has_no_kernels_and_never_reads_out_of_bounds() {
        let img = image(&[("k", GLOBAL_FUNC, STO_CUDA_ENTRY)]);
        assert_eq!(kernel_names(&img).len(), 1);
        // Every truncation of a good image, a PTX text, a 32-bit ELF.
        for n in 0..img.len() {
            assert!(kernel_names(&img[..n]).len() <= 1);
        }
        assert!(kernel_names(b"//\n// Generated by NVIDIA NVVM Compiler\n.version 8.0").is_empty());
        let mut elf32 = img.clone();
        elf32[4] = 1;
        assert!(kernel_names(&elf32).is_empty());
        // Offsets and sizes pointing anywhere.
        let mut bad = img.clone();
        let shoff = u64_at(&img, 0x28).expect("shoff");
        bad[shoff + 2 * SHDR_SIZE + 32..shoff + 2 * SHDR_SIZE + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(kernel_names(&bad).is_empty());
        let mut bad = img;
        bad[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(kernel_names(&bad).is_empty());
    }
}
