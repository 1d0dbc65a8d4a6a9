package redfishbmc

import (
	"fmt"
	"strings"
)

// The paths of our own tree.
const (
	rootPath           = "/redfish/v1"
	systemsPath        = rootPath + "/Systems"
	managersPath       = rootPath + "/Managers"
	chassisPath        = rootPath + "/Chassis"
	sessionServicePath = rootPath + "/SessionService"
	defaultSessions    = sessionServicePath + "/Sessions"
)

// allResetTypes returns the ResetTypes the emulator implements.
func allResetTypes() []string {
	return []string{"On", "ForceOn", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PowerCycle", "Nmi", "PushPowerButton"}
}

// defaultBootTargets returns the override targets of our own tree.
func defaultBootTargets() []string { return []string{"None", "Pxe", "Hdd", "Cd", "BiosSetup"} }

func link(path string) map[string]any { return map[string]any{"@odata.id": path} }

func collection(path, typ, name string, members ...string) map[string]any {
	ms := make([]any, len(members))
	for i, m := range members {
		ms[i] = link(m)
	}
	return map[string]any{
		"@odata.id": path, "@odata.type": "#" + typ + "." + typ, "Name": name,
		"Members": ms, "Members@odata.count": len(ms),
	}
}

// buildTree writes the minimal tree: ServiceRoot, one ComputerSystem with its
// NICs, one Manager, one Chassis and the SessionService.
func (b *BMC) buildTree() {
	c := b.cfg
	sys := systemsPath + "/" + c.SystemID
	mgr, chs := managersPath+"/BMC", chassisPath+"/1"
	b.systemPath, b.resetPath, b.sessionsPath = sys, sys+"/Actions/ComputerSystem.Reset", defaultSessions
	b.resetTypes, b.bootTargets = allResetTypes(), defaultBootTargets()
	t := map[string]map[string]any{}
	t[rootPath] = map[string]any{
		"@odata.id": rootPath + "/", "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot", "Id": "RootService",
		"Name": "Root Service", "RedfishVersion": "1.15.0", "UUID": c.UUID,
		"Systems": link(systemsPath), "Managers": link(managersPath), "Chassis": link(chassisPath),
		"SessionService": link(sessionServicePath), "Links": map[string]any{"Sessions": link(defaultSessions)},
	}
	t[systemsPath] = collection(systemsPath, "ComputerSystemCollection", "Computer System Collection", sys)
	nics := make([]string, len(c.reportedMACs()))
	for i, mac := range c.reportedMACs() {
		nics[i] = fmt.Sprintf("%s/EthernetInterfaces/%d", sys, i+1)
		t[nics[i]] = map[string]any{
			"@odata.id": nics[i], "@odata.type": "#EthernetInterface.v1_9_0.EthernetInterface",
			"Id": fmt.Sprint(i + 1), "Name": fmt.Sprintf("NIC %d", i+1), "InterfaceEnabled": true,
			"MACAddress": strings.ToUpper(mac), "PermanentMACAddress": strings.ToUpper(mac),
			"SpeedMbps": 10000, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
		}
	}
	t[sys+"/EthernetInterfaces"] = collection(sys+"/EthernetInterfaces", "EthernetInterfaceCollection", "Ethernet Interface Collection", nics...)
	t[sys] = map[string]any{
		"@odata.id": sys, "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem", "Id": c.SystemID,
		"Name": "Emulated machine", "SystemType": "Physical", "Manufacturer": c.Manufacturer, "Model": c.Model,
		"SerialNumber": c.Serial, "UUID": c.UUID, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
		"Boot":               map[string]any{"BootSourceOverrideTarget@Redfish.AllowableValues": defaultBootTargets()},
		"ProcessorSummary":   map[string]any{"Count": c.CPUs, "LogicalProcessorCount": c.CPUThreads},
		"MemorySummary":      map[string]any{"TotalSystemMemoryGiB": c.MemoryBytes >> 30},
		"EthernetInterfaces": link(sys + "/EthernetInterfaces"),
		"Links":              map[string]any{"Chassis": []any{link(chs)}, "ManagedBy": []any{link(mgr)}},
		"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
			"target": b.resetPath, "ResetType@Redfish.AllowableValues": allResetTypes(),
		}},
	}
	t[managersPath] = collection(managersPath, "ManagerCollection", "Manager Collection", mgr)
	t[mgr] = map[string]any{
		"@odata.id": mgr, "@odata.type": "#Manager.v1_17_0.Manager", "Id": "BMC", "Name": "Emulated BMC",
		"ManagerType": "BMC", "FirmwareVersion": c.Firmware, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
		"Links": map[string]any{"ManagerForServers": []any{link(sys)}, "ManagerForChassis": []any{link(chs)}},
	}
	b.addManagerMedia(t, mgr)
	t[chassisPath] = collection(chassisPath, "ChassisCollection", "Chassis Collection", chs)
	t[chs] = map[string]any{
		"@odata.id": chs, "@odata.type": "#Chassis.v1_22_0.Chassis", "Id": "1", "Name": "Emulated chassis",
		"ChassisType": "RackMount", "Manufacturer": c.Manufacturer, "Model": c.Model, "SerialNumber": c.Serial,
		"Links": map[string]any{"ComputerSystems": []any{link(sys)}, "ManagedBy": []any{link(mgr)}},
	}
	t[sessionServicePath] = map[string]any{
		"@odata.id": sessionServicePath, "@odata.type": "#SessionService.v1_1_8.SessionService",
		"Id": "SessionService", "Name": "Session Service", "ServiceEnabled": true, "SessionTimeout": 1800,
		"Sessions": link(defaultSessions),
	}
	b.tree = t
}

// reportedMACs are the MACs the BMC tells: none when it hides its NICs.
func (c Config) reportedMACs() []string {
	if c.HideNICs {
		return nil
	}
	return c.MACs
}
