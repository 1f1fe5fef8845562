// Package xdptest builds BPF ELF objects without clang, for tests and examples that need a real
// object file to load (manad's XDP attach takes ELF bytes): programs written with cilium/ebpf/asm
// are laid out as clang -target bpfel would lay them out.
package xdptest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// Prog is one program of a hand-built BPF object: a function symbol in an executable section.
type Prog struct {
	Section, Name string
	Insns         asm.Instructions
}

// BuildELF writes a relocatable little-endian ELF object with the given programs (several may
// share a section), a "license" section (none when license is "") and a symbol table: the layout
// clang -target bpfel produces for programs without maps or BTF. machine is e_machine, normally
// elf.EM_BPF. It fails only when an instruction cannot be encoded.
func BuildELF(machine elf.Machine, license string, progs ...Prog) ([]byte, error) {
	le := binary.LittleEndian
	var strtab bytes.Buffer
	strtab.WriteByte(0)
	str := func(s string) uint32 {
		off := uint32(strtab.Len())
		strtab.WriteString(s)
		strtab.WriteByte(0)
		return off
	}

	type section struct {
		hdr  elf.Section64
		data []byte
	}
	secs := []*section{{}} // SHN_UNDEF
	strtabIdx := len(secs)
	secs = append(secs, &section{hdr: elf.Section64{Name: str(".strtab"), Type: uint32(elf.SHT_STRTAB), Addralign: 1}})

	// Program sections, in order of first appearance.
	type sym struct {
		name      string
		shndx     int
		off, size int
	}
	var syms []sym
	bySection := map[string]*section{}
	secIndex := map[string]int{}
	for _, p := range progs {
		s := bySection[p.Section]
		if s == nil {
			s = &section{hdr: elf.Section64{
				Name: str(p.Section), Type: uint32(elf.SHT_PROGBITS),
				Flags: uint64(elf.SHF_ALLOC | elf.SHF_EXECINSTR), Addralign: 8,
			}}
			bySection[p.Section] = s
			secIndex[p.Section] = len(secs)
			secs = append(secs, s)
		}
		var code bytes.Buffer
		if err := p.Insns.Marshal(&code, le); err != nil {
			return nil, fmt.Errorf("marshalling %s: %w", p.Name, err)
		}
		syms = append(syms, sym{p.Name, secIndex[p.Section], len(s.data), code.Len()})
		s.data = append(s.data, code.Bytes()...)
	}
	if license != "" {
		secs = append(secs, &section{
			hdr:  elf.Section64{Name: str("license"), Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC | elf.SHF_WRITE), Addralign: 1},
			data: append([]byte(license), 0),
		})
	}
	var symtab bytes.Buffer
	binary.Write(&symtab, le, elf.Sym64{}) // the null symbol; writes to a bytes.Buffer cannot fail
	for _, s := range syms {
		binary.Write(&symtab, le, elf.Sym64{
			Name: str(s.name), Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC),
			Shndx: uint16(s.shndx), Value: uint64(s.off), Size: uint64(s.size),
		})
	}
	secs = append(secs, &section{
		hdr: elf.Section64{
			Name: str(".symtab"), Type: uint32(elf.SHT_SYMTAB), Link: uint32(strtabIdx),
			Info: 1, Addralign: 8, Entsize: uint64(binary.Size(elf.Sym64{})),
		},
		data: symtab.Bytes(),
	})
	secs[strtabIdx].data = strtab.Bytes()

	// Layout: header, section contents (8-byte aligned), section header table.
	var body bytes.Buffer
	hdrSize := binary.Size(elf.Header64{})
	for _, s := range secs[1:] {
		for (hdrSize+body.Len())%8 != 0 {
			body.WriteByte(0)
		}
		s.hdr.Off = uint64(hdrSize + body.Len())
		s.hdr.Size = uint64(len(s.data))
		body.Write(s.data)
	}
	for (hdrSize+body.Len())%8 != 0 {
		body.WriteByte(0)
	}
	var ident [elf.EI_NIDENT]byte
	copy(ident[:], elf.ELFMAG)
	ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	h := elf.Header64{
		Ident: ident, Type: uint16(elf.ET_REL), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Shoff: uint64(hdrSize + body.Len()), Ehsize: uint16(hdrSize),
		Shentsize: uint16(binary.Size(elf.Section64{})), Shnum: uint16(len(secs)), Shstrndx: uint16(strtabIdx),
	}
	var out bytes.Buffer
	binary.Write(&out, le, h)
	out.Write(body.Bytes())
	for _, s := range secs {
		binary.Write(&out, le, s.hdr)
	}
	return out.Bytes(), nil
}
