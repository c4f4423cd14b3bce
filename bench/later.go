package main

import "context"

func measureP5(context.Context, config) Row {
	return notMeasured("not yet built into the bench command")
}
func measureP6(context.Context, config) Row {
	return notMeasured("not yet built into the bench command")
}
func measureP7(context.Context, config) Row {
	return notMeasured("not yet built into the bench command")
}
func measureP8(context.Context, config) Row {
	return notMeasured("measured at store level: go test -bench Followers ./logstore")
}
