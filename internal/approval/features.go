package approval

import "github.com/agentbox/sandbox/providers"

// Features says which optional parts of the provider contract the provider
// behind a Gate implements. It is filled once, from the provider, when the
// Gate is made (the Gate alone holds the provider); Capabilities, which
// the provider declares, says what its sandboxes can do.
type Features struct {
	// Machine: sandboxes are machines: Start, Stop, Processes, Signal and
	// Logs work (providers.Machine).
	Machine bool
	// Terminal: commands run on terminals, ExecTerminal works
	// (providers.Terminal).
	Terminal bool
	// UploadFile: a host file is copied into a sandbox directly, UploadFile
	// works (providers.FileUploader).
	UploadFile bool
	// DownloadFile: a sandbox file is copied into a host file directly,
	// DownloadFile works (providers.FileDownloader).
	DownloadFile bool
	// ResolvePath: the provider says where a path leads, so that path
	// rules see through symlinks (providers.PathResolver).
	ResolvePath bool
}

// fillFeatures reads the features of p.
func fillFeatures(p providers.Provider) Features {
	_, machine := p.(providers.Machine)
	_, terminal := p.(providers.Terminal)
	_, up := p.(providers.FileUploader)
	_, down := p.(providers.FileDownloader)
	_, resolve := p.(providers.PathResolver)
	return Features{Machine: machine, Terminal: terminal, UploadFile: up, DownloadFile: down, ResolvePath: resolve}
}

// Features returns the features of the provider behind g.
func (g *Gate) Features() Features { return g.features }
