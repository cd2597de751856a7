package rls

// Load reads a configuration file or directory as LoadOptions.Load does,
// with the zero LoadOptions.
func Load(path string) (*Config, error) { return LoadOptions{}.Load(path) }

// Parse loads one file's contents, path naming it in messages, with the
// zero LoadOptions.
func Parse(path string, data []byte) (*Config, error) {
	c := newConfig([]string{path}, LoadOptions{})
	if err := c.add(path, data); err != nil {
		return nil, err
	}
	return c, nil
}
