package bpfresp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
)

// progPrefix starts the name of every program responder.c defines.
const progPrefix = "vip_"

// attachedProg is a vip program found on an interface.
type attachedProg struct {
	id     ebpf.ProgramID
	name   string
	hook   string // "tcx" or "xdp"
	linkID link.ID
}

// Cleanup detaches every vip program from interface ifname, in the
// calling thread's network namespace: what a vip that did not close its
// responder left there.
func Cleanup(ifname string) error {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return fmt.Errorf("find interface %s to remove vip's eBPF programs: %w", ifname, err)
	}
	return cleanup(ifname, ifi.Index, slog.New(slog.DiscardHandler))
}

func cleanup(ifname string, ifindex int, log *slog.Logger) error {
	progs, err := attached(ifindex)
	if err != nil {
		return classify(err, ifname, TCX, "list the eBPF programs")
	}
	var errs []error
	for _, p := range progs {
		log.Info("removing a vip eBPF program left on the interface", "interface", ifname, "program", p.name, "id", p.id, "hook", p.hook)
		if err := detach(ifindex, p); err != nil {
			errs = append(errs, classify(err, ifname, TCX, fmt.Sprintf("remove vip's eBPF program %s (id %d)", p.name, p.id)))
		}
	}
	return errors.Join(errs...)
}

// attached lists the vip programs on ifindex's tcx ingress and XDP hooks.
func attached(ifindex int) ([]attachedProg, error) {
	var out []attachedProg
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
	switch {
	case errors.Is(err, ebpf.ErrNotSupported):
		// No tcx on this kernel: nothing can be attached there.
	case err != nil:
		return nil, err
	default:
		for _, ap := range res.Programs {
			id, _ := ap.LinkID()
			out = appendVip(out, ap.ID, "tcx", id)
		}
	}
	nl, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return nil, err
	}
	if x := nl.Attrs().Xdp; x != nil && x.Attached && x.ProgId != 0 {
		out = appendVip(out, ebpf.ProgramID(x.ProgId), "xdp", 0)
	}
	return out, nil
}

// appendVip appends program id to progs when it is vip's.
func appendVip(progs []attachedProg, id ebpf.ProgramID, hook string, linkID link.ID) []attachedProg {
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return progs // gone meanwhile
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil || !strings.HasPrefix(info.Name, progPrefix) {
		return progs
	}
	return append(progs, attachedProg{id: id, name: info.Name, hook: hook, linkID: linkID})
}

// detach removes p from ifindex: through its link when it has one, else
// (XDP attached by netlink) through netlink.
func detach(ifindex int, p attachedProg) error {
	if p.linkID == 0 && p.hook == "xdp" {
		id, err := xdpLinkOf(p.id)
		if err != nil {
			return err
		}
		p.linkID = id
	}
	if p.linkID == 0 {
		nl, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return err
		}
		return netlink.LinkSetXdpFdWithFlags(nl, -1, int(nl.Attrs().Xdp.Flags))
	}
	l, err := link.NewFromID(p.linkID)
	if errors.Is(err, os.ErrNotExist) {
		return nil // its process ended meanwhile
	}
	if err != nil {
		return err
	}
	defer l.Close()
	return l.Detach()
}

// xdpLinkOf finds the link that attaches program id, or 0 when none does.
// Program IDs are unique across network namespaces, so the link found is
// the one on this interface.
func xdpLinkOf(id ebpf.ProgramID) (link.ID, error) {
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err == nil && info.Program == id {
			return it.ID, nil
		}
	}
	return 0, it.Err()
}
