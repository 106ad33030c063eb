// Package grafana is the small part of Grafana's dashboard JSON model that
// dbcanary's generated boards use (schemaVersion 39). The generated boards are
// checked against the grafana-foundation-sdk's strict schema decoder in
// internal/generate's tests (TestBoardsStrictSchema).
package grafana

// SchemaVersion is the dashboard schema the boards are written for.
const SchemaVersion = 39

// Dashboard is one board.
type Dashboard struct {
	UID           string      `json:"uid"`
	Title         string      `json:"title"`
	Description   string      `json:"description,omitempty"`
	Tags          []string    `json:"tags"`
	Timezone      string      `json:"timezone"`
	Editable      bool        `json:"editable"`
	GraphTooltip  int         `json:"graphTooltip"`
	Refresh       string      `json:"refresh"`
	SchemaVersion int         `json:"schemaVersion"`
	Version       int         `json:"version"`
	Time          TimeRange   `json:"time"`
	Annotations   Annotations `json:"annotations"`
	Templating    Templating  `json:"templating"`
	Links         []Link      `json:"links"`
	Panels        []Panel     `json:"panels"`
}

// Annotations are the board's annotation queries.
type Annotations struct {
	List []Annotation `json:"list"`
}

// Annotation is one annotation query; the boards carry Grafana's built-in
// one (annotations and alerts of this board).
type Annotation struct {
	BuiltIn    int            `json:"builtIn"`
	Datasource *DatasourceRef `json:"datasource"`
	Enable     bool           `json:"enable"`
	Hide       bool           `json:"hide"`
	IconColor  string         `json:"iconColor"`
	Name       string         `json:"name"`
	Type       string         `json:"type"`
}

// TimeRange is the default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Link links boards sharing a tag.
type Link struct {
	Title       string   `json:"title"`
	Type        string   `json:"type"`
	Icon        string   `json:"icon"`
	Tooltip     string   `json:"tooltip"`
	Tags        []string `json:"tags"`
	AsDropdown  bool     `json:"asDropdown"`
	TargetBlank bool     `json:"targetBlank"`
	IncludeVars bool     `json:"includeVars"`
	KeepTime    bool     `json:"keepTime"`
}

// Templating holds the variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a dashboard variable (datasource or query).
type Variable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Query      any            `json:"query"`
	Definition string         `json:"definition,omitempty"`
	Datasource *DatasourceRef `json:"datasource,omitempty"`
	Refresh    int            `json:"refresh,omitempty"`
	Multi      bool           `json:"multi"`
	IncludeAll bool           `json:"includeAll"`
	AllValue   string         `json:"allValue,omitempty"`
	Sort       int            `json:"sort,omitempty"`
	Current    map[string]any `json:"current"`
	Options    []any          `json:"options"`
	Hide       int            `json:"hide"`
}

// VariableQuery is a query variable's query in the Prometheus datasource's form.
type VariableQuery struct {
	Query string `json:"query"`
	RefID string `json:"refId"`
}

// DatasourceRef points at a datasource, here always by the ${datasource} variable.
type DatasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Panel is a timeseries, stat or row panel.
type Panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	GridPos     GridPos        `json:"gridPos"`
	Datasource  *DatasourceRef `json:"datasource,omitempty"`
	Targets     []Target       `json:"targets,omitempty"`
	FieldConfig *FieldConfig   `json:"fieldConfig,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
	Collapsed   bool           `json:"collapsed,omitempty"`
	// Panels is a row's collapsed panels: required (empty) on a row, absent
	// (nil) on the other panel types.
	Panels []Panel `json:"panels,omitzero"`
}

// Target is one query of a panel.
type Target struct {
	RefID        string         `json:"refId"`
	Datasource   *DatasourceRef `json:"datasource"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat"`
	Range        bool           `json:"range"`
	Instant      bool           `json:"instant"`
}

// FieldConfig sets units, thresholds and drawing style.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []any         `json:"overrides"`
}

// FieldDefaults are the defaults of every field of a panel.
type FieldDefaults struct {
	Unit       string         `json:"unit"`
	Min        *float64       `json:"min,omitempty"`
	Max        *float64       `json:"max,omitempty"`
	Decimals   *int           `json:"decimals,omitempty"`
	Thresholds *Thresholds    `json:"thresholds"`
	Color      map[string]any `json:"color,omitempty"`
	Custom     map[string]any `json:"custom,omitempty"`
	Mappings   []any          `json:"mappings"`
}

// Thresholds are absolute steps; the first has no value (the base).
type Thresholds struct {
	Mode  string `json:"mode"`
	Steps []Step `json:"steps"`
}

// Step is one threshold step; Value nil is the base (-Infinity).
type Step struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}
