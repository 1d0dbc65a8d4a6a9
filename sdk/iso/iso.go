// Package iso writes and reads ISO 9660 images (ECMA-119): what a plugin
// needs to hand a machine a small per-node CD through its BMC's virtual
// media, such as the cloud-init "cidata" volume an autoinstall reads its
// user data from, without shelling out to a tool that may be missing.
//
// Write makes an image with the primary volume descriptor, both path
// tables and a root directory holding the files (no subdirectories, no
// Joliet or Rock Ridge). The image is the same bytes for the same input:
// dates are recorded as "not specified", so a digest of it names its
// content. ReadFile reads a file from the root directory of an image, ours
// or one another tool wrote (it also knows Rock Ridge's alternate names).
package iso

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// SectorSize is the logical block size of the images Write makes.
const SectorSize = 2048

// Layout of the images Write makes (ECMA-119 6.2, 8.4): sixteen sectors of
// system area, the primary volume descriptor, the set terminator, the two
// path tables, then the root directory and the files.
const (
	pvdSector   = 16
	termSector  = 17
	pathLSector = 18
	pathMSector = 19
	rootSector  = 20
)

// Limits of what Write accepts.
const (
	maxNameLen   = 30 // ECMA-119 7.5.1: name and extension together, level 2
	maxVolumeLen = 32 // the volume identifier field
	maxFileSize  = 1<<32 - 1
)

// Write writes an ISO 9660 image to w holding files in its root directory.
// volumeID is the volume label (up to 32 of A-Z a-z 0-9 _ -; "cidata" for
// cloud-init's NoCloud, kept as given as genisoimage -V does). A file's
// name is up to 30 of A-Z a-z 0-9 _ - with at most one '.', recorded in
// upper case as NAME.EXT;1: readers that map names (the Linux kernel's
// default, ReadFile) give it back as given in lower case. The hyphen is
// outside ECMA-119's d-characters; readers accept it as they accept
// genisoimage -relaxed-filenames. Nothing is written when an argument is
// invalid.
func Write(w io.Writer, volumeID string, files map[string][]byte) error {
	if err := checkVolumeID(volumeID); err != nil {
		return err
	}
	entries, err := layout(files)
	if err != nil {
		return err
	}
	img := newImage(volumeID, entries)
	for _, b := range img.head {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := writePadded(w, e.data); err != nil {
			return err
		}
	}
	return nil
}

// entry is one file of an image being written.
type entry struct {
	id     string // the recorded identifier, NAME.EXT;1
	data   []byte
	sector uint32
}

// layout checks the files' names and places each at its sector, in the
// order of their identifiers (ECMA-119 9.3).
func layout(files map[string][]byte) ([]entry, error) {
	seen := map[string]string{}
	var entries []entry
	for name, data := range files {
		id, err := identifier(name)
		if err != nil {
			return nil, err
		}
		if other, ok := seen[id]; ok {
			return nil, fmt.Errorf("iso: files %q and %q have the same name in the image (%s): names are recorded in upper case", other, name, id)
		}
		if len(data) > maxFileSize {
			return nil, fmt.Errorf("iso: file %q is %d bytes; a file is at most %d", name, len(data), maxFileSize)
		}
		seen[id] = name
		entries = append(entries, entry{id: id, data: data})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].id < entries[j].id })
	next := uint64(rootSector) + uint64(dirSectors(entries))
	for i := range entries {
		if len(entries[i].data) == 0 {
			continue // an empty file has no extent
		}
		entries[i].sector = uint32(next)
		next += uint64(sectors(len(entries[i].data)))
	}
	if next > 1<<32-1 {
		return nil, fmt.Errorf("iso: the files need %d sectors; an image holds at most %d", next, uint64(1<<32-1))
	}
	return entries, nil
}

// identifier turns a file's name into its recorded identifier.
func identifier(name string) (string, error) {
	bad := func(why string) error { return fmt.Errorf("iso: file name %q: %s", name, why) }
	switch {
	case name == "":
		return "", bad("empty")
	case len(name) > maxNameLen:
		return "", bad(fmt.Sprintf("longer than %d characters", maxNameLen))
	case strings.Count(name, ".") > 1:
		return "", bad("more than one '.' (the root directory holds files only, no subdirectories)")
	case name == ".":
		return "", bad("no name and no extension")
	}
	for _, c := range name {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "", bad(fmt.Sprintf("holds %q; names are A-Z a-z 0-9 _ - and one '.'", c))
		}
	}
	id := strings.ToUpper(name)
	if !strings.Contains(id, ".") {
		id += "." // ECMA-119 7.5.1: the separator is there even without an extension
	}
	return id + ";1", nil
}

func checkVolumeID(v string) error {
	if v == "" || len(v) > maxVolumeLen {
		return fmt.Errorf("iso: volume id %q: 1 to %d characters", v, maxVolumeLen)
	}
	for _, c := range v {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("iso: volume id %q holds %q; it is A-Z a-z 0-9 _ -", v, c)
		}
	}
	return nil
}

func sectors(n int) int { return (n + SectorSize - 1) / SectorSize }

func writePadded(w io.Writer, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	if pad := sectors(len(b))*SectorSize - len(b); pad > 0 {
		_, err := w.Write(make([]byte, pad))
		return err
	}
	return nil
}

// Both-byte-order fields (ECMA-119 7.2.3, 7.3.3): little-endian then
// big-endian.
func both16(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b, v)
	binary.BigEndian.PutUint16(b[2:], v)
}

func both32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}

// ErrNotISO says the bytes are not an ISO 9660 image ReadFile can read.
var ErrNotISO = errors.New("iso: not an ISO 9660 image")
