package disk

import (
	"encoding/binary"
	"hash/crc32"
)

// GPTImage is a raw image of sectors 512-byte sectors with a protective MBR
// and a GPT of 128 entries holding one partition, first to last, as a
// cloud image's (its backup table at the image's end, not the disk's): the
// image tests and the emulated rack deploy with user data (WriteSeed needs
// a GPT).
func GPTImage(sectors, first, last int64) []byte {
	img := make([]byte, sectors*512)
	le := binary.LittleEndian
	img[446+4] = 0xee
	le.PutUint32(img[446+8:], 1)
	le.PutUint32(img[446+12:], uint32(sectors-1))
	img[510], img[511] = 0x55, 0xaa
	entries := make([]byte, 128*128)
	copy(entries, linuxData[:])
	entries[16] = 1
	le.PutUint64(entries[32:], uint64(first))
	le.PutUint64(entries[40:], uint64(last))
	copy(entries[56:], []byte{'r', 0, 'o', 0, 'o', 0, 't', 0})
	hdr := func(my, alt, ents int64) []byte {
		h := make([]byte, 92)
		copy(h, "EFI PART")
		le.PutUint32(h[8:], 0x10000)
		le.PutUint32(h[12:], 92)
		le.PutUint64(h[24:], uint64(my))
		le.PutUint64(h[32:], uint64(alt))
		le.PutUint64(h[40:], 34)
		le.PutUint64(h[48:], uint64(sectors-34))
		h[56] = 7
		le.PutUint64(h[72:], uint64(ents))
		le.PutUint32(h[80:], 128)
		le.PutUint32(h[84:], 128)
		le.PutUint32(h[88:], crc32.ChecksumIEEE(entries))
		le.PutUint32(h[16:], crc32.ChecksumIEEE(h))
		return h
	}
	copy(img[512:], hdr(1, sectors-1, 2))
	copy(img[2*512:], entries)
	copy(img[(sectors-33)*512:], entries)
	copy(img[(sectors-1)*512:], hdr(sectors-1, 1, sectors-33))
	return img
}
