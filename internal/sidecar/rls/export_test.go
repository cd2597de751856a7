package rls

// Load reads a configuration file or directory as LoadOptions.Load does,
// with the zero LoadOptions.
func Load(path string) (*Config, error) { return LoadOptions{}.Load(path) }
