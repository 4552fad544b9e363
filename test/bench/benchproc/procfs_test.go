package benchproc

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestReadProcOfThisProcess(t *testing.T) {
	p, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.RSS <= 0 || p.HWM < p.RSS {
		t.Errorf("ReadProc = %+v: want 0 < RSS <= HWM", p)
	}
}

func TestReadProcOfNoProcessFails(t *testing.T) {
	p, err := ReadProc(-1)
	if err == nil || p != (Proc{}) {
		t.Fatalf("ReadProc(-1) = %+v, %v: want zero and an error", p, err)
	}
}

func TestChildrenNamedFindsAChildByItsName(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }() // only started here
	if got := ChildrenNamed(os.Getpid(), "etcd", "sleep"); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Errorf("ChildrenNamed(me, etcd, sleep) = %v, want [%d]", got, cmd.Process.Pid)
	}
	if got := ChildrenNamed(os.Getpid(), "etcd"); len(got) != 0 {
		t.Errorf("ChildrenNamed(me, etcd) = %v, want none", got)
	}
}

func TestLoadAvg(t *testing.T) {
	one, five, fifteen, err := LoadAvg()
	if err != nil || one < 0 || five < 0 || fifteen < 0 {
		t.Fatalf("LoadAvg = %g %g %g, %v", one, five, fifteen, err)
	}
}
