package state

import (
	"fmt"
	"os"
	"path/filepath"
)

// write replaces the state file with data atomically: a temporary file in
// the same directory (so the rename cannot cross file systems), synced,
// renamed over the state file, and the directory synced so the rename itself
// survives a power cut. The file is created with mode 0600. Unless synced,
// the two syncs are left for Sync: the rename alone makes the new file
// whole for any reader, a crash of this process included.
func (f *File) write(data []byte, synced bool) error {
	f.writes++
	dir, base := filepath.Split(f.path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("cannot create a file in directory %s: %w", dir, err)
	}
	_, err = tmp.Write(data)
	if err == nil && synced {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	// The rename has happened: a failure from here on leaves the new book
	// at path even though the change is reported as failed. The next
	// successful write makes the two agree again.
	f.unsynced = !synced
	if !synced {
		return nil
	}
	return syncDir(dir)
}

// syncFile syncs the file at path and its directory.
func syncFile(path string) error {
	fd, err := os.Open(path)
	if err != nil {
		return err
	}
	err = fd.Sync()
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
