package codecontext_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/conchsh/conch/codecontext"
	"github.com/conchsh/conch/logstore"
)

func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := codecontext.New(ctx, codecontext.Options{Language: codecontext.Python, Cwd: os.TempDir()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.Run(ctx, codecontext.CellOptions{Code: "import math\nr = 2"})
	cell, res, err := c.Run(ctx, codecontext.CellOptions{Code: "print('area'); math.pi * r ** 2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Reason, *res.ExitCode)
	for _, f := range cell.Log().Page(0, 0).Frames {
		if f.Channel == logstore.Stdout {
			fmt.Print(string(f.Data))
		}
	}
	// Output:
	// exited 0
	// area
	// 12.566370614359172
}
