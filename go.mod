module github.com/agentbox/sandbox

go 1.26.8

require (
	github.com/bmatcuk/doublestar/v4 v4.10.4
	github.com/gofrs/flock v0.13.1
	github.com/joho/godotenv v1.5.1
	github.com/landlock-lsm/go-landlock v0.11.0
	github.com/pmezard/go-difflib v1.0.0
	github.com/rogpeppe/go-internal v1.16.0
	github.com/spf13/cobra v1.10.2
	golang.org/x/net v0.53.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
	gopkg.in/yaml.v3 v3.0.1
	kernel.org/pub/linux/libs/security/libcap/psx v1.2.77
	mvdan.cc/sh/v3 v3.14.1
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/tools v0.38.0 // indirect
)
