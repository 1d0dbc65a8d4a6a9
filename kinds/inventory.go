package kinds

// NIC is one network interface of the machine.
type NIC struct {
	Name string `json:"name"`
	MAC  string `json:"mac"` // lowercase colon form
}

// Inventory is inventory.refresh's result: what the ramdisk sees of the machine.
type Inventory struct {
	NodeID      string          `json:"nodeId"`
	ProductUUID string          `json:"productUuid,omitempty"`
	Disks       []InventoryDisk `json:"disks"`
	NICs        []NIC           `json:"nics"`
	CPUs        int             `json:"cpus"`
	MemoryBytes int64           `json:"memoryBytes"`
}

// InventoryDisk is one disk in the inventory, named by WWN else serial.
type InventoryDisk struct {
	Name                string `json:"name"`
	WWN                 string `json:"wwn,omitempty"`
	Serial              string `json:"serial,omitempty"`
	Model               string `json:"model,omitempty"`
	SizeBytes           int64  `json:"sizeBytes"`
	Rotational          bool   `json:"rotational,omitempty"`
	SupportsSecureErase bool   `json:"supportsSecureErase,omitempty"`
	SupportsCryptoErase bool   `json:"supportsCryptoErase,omitempty"`
}
